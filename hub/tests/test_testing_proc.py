"""hub.testing.Proc, the test suite's way to run a worker, beat or server: it waits for its own ready line."""

from __future__ import annotations

import os
import sys

from hub.testing import Proc

SERVE = "import time; print('ready.', flush=True); time.sleep(30)"


def test_a_new_proc_waits_for_its_own_ready_line_not_one_an_earlier_process_of_its_name_wrote(tmp_path):
    log = tmp_path / "worker-e1.log"
    log.write_text("an earlier worker-e1 (another test, or a run before): ready.\n")
    proc = Proc("worker-e1", [sys.executable, "-c", SERVE], dict(os.environ), log, ready="ready.")
    try:
        proc.start_and_wait(timeout=15)
        assert proc.log_text() == "ready.\n"
        proc.stop()
        proc.start_and_wait(timeout=15)  # a restart of the same Proc waits for the new run's line
        assert proc.log_text() == "ready.\nready.\n"
    finally:
        proc.stop()
