"""scripts/keepalive.py: a command that dies comes back; what a dead command left running does not outlive it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

BASE = Path(__file__).resolve().parents[2]
KEEPALIVE = BASE / "scripts" / "keepalive.py"

# A parent with a child of its own, as the web server is (uvicorn's parent and its workers): both pids go to a file.
PARENT = textwrap.dedent(
    """
    import os, subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    with open(sys.argv[1], "a") as out:
        out.write(f"{os.getpid()} {child.pid}\\n")
    time.sleep(120)
    """
)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_for(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_a_parent_killed_alone_takes_its_children_with_it_before_the_restart(tmp_path):
    pids = tmp_path / "pids"
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    keep = subprocess.Popen(
        [sys.executable, str(KEEPALIVE), sys.executable, str(script), str(pids)],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _wait_for(lambda: pids.exists() and len(pids.read_text().splitlines()) == 1)
        parent, child = map(int, pids.read_text().split())
        os.kill(parent, signal.SIGKILL)  # the child is orphaned: without keepalive's care it lives on
        _wait_for(lambda: len(pids.read_text().splitlines()) == 2)  # the command runs again
        assert not _alive(child)
        new_parent, new_child = map(int, pids.read_text().splitlines()[1].split())
        assert _alive(new_parent) and _alive(new_child)
    finally:
        keep.send_signal(signal.SIGTERM)
        _, err = keep.communicate(timeout=20)
    assert keep.returncode == 0, err
    assert "left behind" in err
    assert not _alive(new_child)  # stopping keepalive leaves nothing of the command either


# A supervisor that starts keepalive, says its pid, and waits: the test then SIGKILLs it.
MIDDLE = textwrap.dedent(
    """
    import subprocess, sys, time
    keep = subprocess.Popen([sys.executable, *sys.argv[1:]])
    print(keep.pid, flush=True)
    time.sleep(120)
    """
)


def _tree_of(pid: int) -> list[int]:
    from hub.testing import process_tree

    return process_tree(pid)


def _middle(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, int]:
    script = tmp_path / "middle.py"
    script.write_text(MIDDLE)
    middle = subprocess.Popen(
        [sys.executable, str(script), str(KEEPALIVE), *args], stdout=subprocess.PIPE, text=True
    )
    return middle, int(middle.stdout.readline())


def test_keepalive_and_its_command_tree_end_when_its_supervisor_is_killed(tmp_path):
    pids = tmp_path / "pids"
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    middle, keep = _middle(tmp_path, sys.executable, str(script), str(pids))
    try:
        _wait_for(lambda: pids.exists() and pids.read_text().strip())
        tree = _tree_of(keep)
        assert len(tree) == 3  # keepalive, the command, the command's own child
        middle.kill()
        middle.wait()
        _wait_for(lambda: not any(_alive(pid) for pid in tree), timeout=5)
    finally:
        middle.kill()


def test_once_runs_the_command_in_its_place_and_it_ends_with_the_supervisor(tmp_path):
    middle, keep = _middle(tmp_path, "--once", "sleep", "60")
    try:
        _wait_for(
            lambda: Path(f"/proc/{keep}/cmdline").read_bytes().startswith(b"sleep\0")
        )  # exec'd: no wrapper
        middle.kill()
        middle.wait()
        _wait_for(lambda: not _alive(keep), timeout=5)
    finally:
        middle.kill()


# Where the kernel cannot tell (no PR_SET_PDEATHSIG), a thread watches the parent's pid: the watcher runs in a
# grandchild of the test, whose parent (the middle process) is then killed.
WATCHER = textwrap.dedent(
    """
    import importlib.util, os, signal, sys, time
    from pathlib import Path
    spec = importlib.util.spec_from_file_location("keepalive", sys.argv[1])
    keepalive = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(keepalive)
    signal.signal(signal.SIGTERM, lambda *_: (Path(sys.argv[2]).write_text("parent gone"), os._exit(0)))
    Path(sys.argv[2]).write_text("watching")
    keepalive.watch_parent(os.getppid())
    time.sleep(30)
    """
)


def test_without_the_kernels_help_a_watch_on_the_parent_pid_notices_it_going(tmp_path):
    script = tmp_path / "watcher.py"
    script.write_text(WATCHER)
    told = tmp_path / "told"
    middle = subprocess.Popen(
        [sys.executable, "-c", MIDDLE, str(script), str(KEEPALIVE), str(told)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        watcher = int(middle.stdout.readline())
        _wait_for(lambda: told.exists() and told.read_text() == "watching")
        middle.kill()
        middle.wait()
        _wait_for(lambda: told.exists() and told.read_text() == "parent gone", timeout=5)
        _wait_for(lambda: not _alive(watcher), timeout=5)
    finally:
        middle.kill()
