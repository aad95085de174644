"""Issue 24 item 6: each process's log under ``<data dir>/logs/`` rotates by size and count, and ``make logs``
(``tail -F``) follows it across the rotations."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import threading
from pathlib import Path

from hub.testing import load_script

BASE = Path(__file__).resolve().parents[2]
UP = BASE / "scripts" / "up.py"


def _up():
    return load_script("up")


def _line(name: str, text: str):
    from honcho.printer import Message

    return Message("line", f"{text}\n".encode(), dt.datetime(2026, 12, 1, 21, 30, 5), name, None)


def test_a_full_log_is_renamed_and_only_the_newest_few_are_kept(tmp_path):
    up = _up()
    router = up.LogRouter(tmp_path, max_bytes=100, keep=2)
    for n in range(12):  # 36 bytes a line with its time stamp: a new file every 3 lines
        router.write(_line("worker", f"line {n:02d} of work"))
    router.write(_line("web", "a quiet web line"))
    router.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["web.log", "worker.log.1", "worker.log.2"]  # worker.log starts again at the next line
    assert (tmp_path / "worker.log.1").read_text().splitlines()[-1].endswith("line 11 of work")
    assert (tmp_path / "worker.log.2").read_text().splitlines()[0].endswith("line 06 of work")
    assert all(p.stat().st_size <= 100 + 36 for p in tmp_path.iterdir())
    router = up.LogRouter(tmp_path, max_bytes=100, keep=2)
    router.write(_line("worker", "after a restart"))
    router.close()
    assert (tmp_path / "worker.log").read_text().endswith("after a restart\n")


def test_a_token_a_process_prints_past_its_logger_is_masked_in_its_file(tmp_path):
    """A traceback or a print reaches make up's log files without any logger's mask: the router masks it."""
    router = _up().LogRouter(tmp_path)
    router.write(_line("web", "Traceback: GET /jobs/shared/Zq8u2sharetoken9/files/3/ failed"))
    router.write(_line("worker", "headers={'Authorization': 'Bearer thub_AbCdEf0123456789'}"))
    router.close()
    web, worker = (tmp_path / "web.log").read_text(), (tmp_path / "worker.log").read_text()
    assert "/jobs/shared/***/files/3/" in web and "Zq8u2sharetoken9" not in web
    assert "AbCdEf0123456789" not in worker and "Bearer ***" in worker


def test_the_limits_come_from_the_environment_and_bad_ones_get_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "DJANGO", "REDIS_URL"))}
    env.update(
        HUB_DATA_DIR=str(tmp_path), HUB_LOG_MAX_MB="lots", HUB_SECRET_KEY="x", HUB_EMULATOR_API_KEY="x"
    )
    env.update(HUB_VAPID_PRIVATE_KEY="x", HUB_REDIS_PASSWORD="x")
    out = subprocess.run(
        [str(BASE / ".venv" / "bin" / "python"), str(UP)],
        cwd=BASE,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        line for line in out.stderr.strip().splitlines() if "HUB_LOG_MAX_MB" in line
    ]
    assert "Traceback" not in out.stderr and "configuration error" in out.stderr


def test_make_logs_keeps_following_a_file_across_its_rotation(tmp_path):
    up = _up()
    logs = tmp_path / "logs"
    router = up.LogRouter(logs, max_bytes=200, keep=3)
    router.write(_line("web", "before the rotation"))
    proc = subprocess.Popen(
        ["make", "-s", "--no-print-directory", "logs"],
        cwd=BASE,
        env={**os.environ, "HUB_DATA_DIR": str(tmp_path)},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    seen: list[str] = []
    timer = threading.Timer(30, lambda: os.killpg(proc.pid, signal.SIGTERM))  # a hang fails, never blocks
    timer.start()
    try:

        def saw(text: str) -> bool:
            while text not in "".join(seen):
                line = proc.stdout.readline()
                if not line:
                    return False
                seen.append(line)
            return True

        assert saw("before the rotation")
        for rotation in (1, 2, 3):  # web.log is renamed (web.log.1, then .2 …) and begun again, three times
            while not (logs / f"web.log.{rotation}").exists():
                router.write(_line("web", "filler " + "x" * 60))
            router.write(_line("web", f"after rotation {rotation}"))
            assert saw(f"after rotation {rotation}"), "".join(seen)
    finally:
        timer.cancel()
        router.close()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def test_beat_keeps_its_start_line_but_not_one_per_periodic_task():
    """A supervisor waits for "beat: Starting"; the line for every task beat sends would fill the logs."""
    import logging

    from hub.logfilters import DropDueTaskLines

    keep = DropDueTaskLines()
    record = logging.LogRecord("celery.beat", logging.INFO, __file__, 1, "beat: Starting...", None, None)
    due = logging.LogRecord(
        "celery.beat",
        logging.INFO,
        __file__,
        1,
        "Scheduler: Sending due task %s (%s)",
        ("reconcile", "x"),
        None,
    )
    assert keep.filter(record) and not keep.filter(due)
    assert any(isinstance(f, DropDueTaskLines) for f in logging.getLogger("celery.beat").filters)
