"""Issue 27: a killed `make up` leaves nothing running, and the next one stops what an earlier one left.

The hub's processes are found the way a person would: every process whose environment names this test's data
folder (``HUB_DATA_DIR``), whatever it is called.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from hub import runrecord
from hub.testing import load_script

BASE = Path(__file__).resolve().parents[2]


def _wait_for(predicate, timeout: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def hub_processes(data_dir: Path) -> list[int]:
    """Live (not zombie) processes whose environment has ``HUB_DATA_DIR=<data_dir>``, the test itself aside."""
    mark = f"HUB_DATA_DIR={data_dir}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        if mark in environ.split(b"\0") and runrecord.state(int(name)) not in ("", "Z"):
            found.append(int(name))
    return found


def up_env(data_dir: Path, **extra: str) -> dict[str, str]:
    from hub.redis_server import free_port

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_URL", "REDIS_URL", "HUB_", "DJANGO", "MAKE", "MFLAGS"))
    }
    env.update(
        HUB_DATA_DIR=str(data_dir),
        HUB_PORT=str(free_port()),
        HUB_REDIS_PORT=str(free_port()),
        HUB_EMULATOR_PORT=str(free_port()),
        HUB_WEB_WORKERS="2",
        HUB_PROFILE="standard",  # the same processes whatever the machine's memory
        HUB_INSECURE_FAST_HASHER="1",
        # Given, so up.py writes nothing into the checkout's .env.
        HUB_SECRET_KEY="make-up-test",
        HUB_EMULATOR_API_KEY="make-up-test",
        HUB_VAPID_PRIVATE_KEY="make-up-test",
        HUB_REDIS_PASSWORD="make-up-test",
    )
    env.update(extra)
    return env


class MakeUp:
    """`make up` in a process group of its own (make, up.py and honcho's helpers, as from a terminal)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            # -o: never reinstall the shared virtualenv from a test, whatever the files' dates say.
            ["make", "-s", "--no-print-directory", "-o", ".venv/.installed", "up"],
            cwd=BASE,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.env['HUB_PORT']}"

    def wait_up(self) -> str:
        for line in self.proc.stdout:
            self.lines.append(line)
            if "Status page" in line:
                return "".join(self.lines)
        raise AssertionError("make up stopped before it was up:\n" + "".join(self.lines))

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def manifest_kept():
    """make up collects the static files into the checkout's STATIC_ROOT; a manifest left there would switch the
    servers later tests start to hashed names (hub.settings), so it goes again unless it was there before."""
    manifest = BASE / "staticfiles" / "staticfiles.json"
    had = manifest.exists()
    yield
    if not had:
        manifest.unlink(missing_ok=True)


@pytest.mark.integration
def test_a_make_up_killed_hard_leaves_no_process_of_the_hub(tmp_path, manifest_kept):
    hub = MakeUp(up_env(tmp_path, HUB_DEVICE="emulator"))
    try:
        hub.wait_up()
        running = hub_processes(tmp_path)
        # make, up.py, honcho's 5 helpers, 3 keepalives, web (parent, tracker, 2 workers), worker (+2), beat,
        # redis, emulator
        assert len(running) >= 15, running
        _wait_for(lambda: (tmp_path / "run" / "up.json").exists(), what="the run record")
        hub.kill()  # make and up.py (and honcho's helpers, in their group): as an OOM kill or a crashed session
        _wait_for(lambda: not hub_processes(tmp_path), timeout=5, what="every process of the hub to end")
    finally:
        _kill_all(hub_processes(tmp_path))


def test_a_recorded_pid_now_held_by_a_stranger_is_never_stopped(tmp_path):
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ours = subprocess.Popen(["sleep", "60"])
    try:
        me = runrecord.entry("stranger", stranger.pid)
        # The stranger got a pid an earlier run recorded, with another start time (a reused pid)...
        reused = runrecord.Entry("web", stranger.pid, me.start - 1, me.cmd)
        # ...or the same start time but another program (a record that was not ours).
        other = runrecord.Entry("worker", stranger.pid, me.start, ["/usr/bin/redis-server", "x"])
        runrecord.write(tmp_path, [reused, other, runrecord.entry("beat", ours.pid, ["sleep", "60"])])
        found = runrecord.leftovers(tmp_path)
        assert [e.pid for e in found] == [ours.pid]
        assert runrecord.stop(found, grace_s=2) == []
        assert ours.wait(timeout=5) == -signal.SIGTERM
        assert stranger.poll() is None
    finally:
        stranger.kill()
        ours.kill()
        stranger.wait()
        ours.wait()


def test_a_process_that_renamed_itself_is_still_recognised_and_what_runs_under_it_goes_too(tmp_path):
    script = "import subprocess, sys, time; subprocess.Popen(['sleep', '60']); print('ok', flush=True); time.sleep(60)"
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ok"
        recorded = runrecord.entry("web", parent.pid, [f"{sys.executable} hub.webserver", "--port", "1"])
        runrecord.write(tmp_path, [recorded])
        found = runrecord.leftovers(tmp_path)
        assert len(found) == 2 and {runrecord.program(e.cmd) for e in found} == {
            Path(sys.executable).name,
            "sleep",
        }
        assert runrecord.stop(found, grace_s=2) == []
    finally:
        parent.kill()
        parent.wait()


def test_an_unreadable_record_stops_nothing(tmp_path):
    (tmp_path / runrecord.RECORD).write_text('{"processes": [{"pid": ')
    assert runrecord.leftovers(tmp_path) == []
    assert runrecord.read(tmp_path / "nowhere") == []


def _healthz(url: str) -> int:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code
    except httpx.HTTPError:
        return 0


SUBMIT = """
from types import SimpleNamespace
from django.contrib.auth import get_user_model
from jobs.doors.intake import check_request
from jobs.queue.services import submit_checked
from jobs.tests.conftest import make_device
device = make_device(SimpleNamespace(base_url="{url}", api_key="{key}"), name="Tiiny")
admin = get_user_model().objects.get(username="admin")
data = {{"model": "MiniMaxAI/MiniMax-H3-Turbo", "prompt": "a fox at night", "size": "832x480", "steps": 4,
        "seconds": 2, "polite": False}}
checked = check_request(owner=admin, device=device, kind="video", data=data)
print("job", submit_checked(owner=admin, device=device, checked=checked).pk)
"""

STATE = """
from jobs.models import Job
job = Job.objects.get(pk={pk})
print("state", job.state)
"""


def _manage_shell(env: dict[str, str], code: str) -> str:
    out = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code], cwd=BASE, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _supervisors(data_dir: Path) -> list[int]:
    """make, up.py, honcho's helpers and the keepalive wrappers: everything that watches over the services."""
    found = []
    for pid in hub_processes(data_dir):
        cmd = " ".join(runrecord.cmdline(pid))
        if "scripts/up.py" in cmd or "keepalive.py" in cmd or runrecord.program(cmd.split()) == "make":
            found.append(pid)
    return found


@pytest.mark.integration
def test_a_second_make_up_stops_what_the_first_left_running_and_the_render_in_flight_finishes_once(
    tmp_path, manifest_kept
):
    from devices.emulator.testing import run_tiiny

    # The device lives apart from the hub, as a real Tiiny does: its render goes on while the hub is replaced.
    # Speed 12: the video (7 device-minutes) takes ~35 s; it is slowed to a crawl while the hub is replaced (below).
    with run_tiiny(speed=12, quirks="none", api_key="tiiny-key") as tiiny:
        env = up_env(tmp_path, HUB_DEVICE="none")
        first = MakeUp(env)
        second = None
        try:
            first.wait_up()
            job = int(_manage_shell(env, SUBMIT.format(url=tiiny.base_url, key=tiiny.api_key)).split()[-1])
            _wait_for(
                lambda: tiiny.counters()["renders_submitted"] == 1, timeout=60, what="the render to start"
            )
            _wait_for(lambda: (tmp_path / "run" / "up.json").exists(), what="the run record")
            # The render stays in flight across the restart however long the second make up takes to start on a
            # busy machine (at speed 12 it ended first once, under load): the device slows to a crawl until then.
            tiiny.set_speed(0.05)
            # Whatever watches over the services is frozen, then make and up.py are killed: the services (web,
            # worker, beat) live on, unsupervised, as when a keepalive never got to act.
            watchers = _supervisors(tmp_path)
            for pid in watchers:
                os.kill(pid, signal.SIGSTOP)
            first.kill()
            left = [pid for pid in hub_processes(tmp_path) if pid not in watchers]
            assert len(left) >= 5, left  # web's parent and workers, the Celery worker and its pool, beat
            second = MakeUp(env)
            text = second.wait_up()
            stopped = [line for line in text.splitlines() if "an earlier `make up` left running" in line]
            assert len(stopped) == 1 and "web" in stopped[0] and "worker" in stopped[0], text
            assert not any(runrecord.state(pid) not in ("", "Z") for pid in left)
            assert tiiny.counters()["renders_completed"] == 0  # the render was in flight across the restart
            tiiny.set_speed(12)
            _wait_for(lambda: _healthz(second.url) == 200, timeout=60, what="/healthz 200")

            def done() -> bool:
                state = _manage_shell(env, STATE.format(pk=job)).split()[-1]
                assert state not in ("failed", "cancelled", "interrupted"), state
                return state == "done"

            _wait_for(done, timeout=120, what="the render to finish")
            counters = tiiny.counters()
            assert counters["renders_submitted"] == 1 and counters["renders_completed"] == 1, counters
        finally:
            if second is not None:
                second.stop()
            first.stop()
            _kill_all(hub_processes(tmp_path))


def _up_script():
    return load_script("up")


def test_a_hub_still_running_from_the_data_folder_is_left_alone_with_one_line(tmp_path, capsys):
    supervisor = subprocess.Popen(["sleep", "60"])
    try:
        runrecord.write(tmp_path, [runrecord.entry("supervisor", supervisor.pid, ["sleep", "60"])])
        with pytest.raises(SystemExit) as stop:
            _up_script().stop_earlier_run(tmp_path)
        assert stop.value.code == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert (
            len(err) == 1
            and f"a hub is already running from this data folder (pid {supervisor.pid})" in err[0]
        )
        assert supervisor.poll() is None
    finally:
        supervisor.kill()
        supervisor.wait()


def test_leftovers_are_stopped_and_named_in_one_line(tmp_path, capsys):
    worker = subprocess.Popen(["sleep", "60"])
    try:
        runrecord.write(tmp_path, [runrecord.entry("worker", worker.pid, ["sleep", "60"])])
        _up_script().stop_earlier_run(tmp_path)
        out = capsys.readouterr().out.strip().splitlines()
        assert out == ["tiiny-hub: stopped 1 process(es) an earlier `make up` left running (worker)"]
        assert worker.wait(timeout=5) == -signal.SIGTERM
        assert not (tmp_path / runrecord.RECORD).exists()
    finally:
        worker.kill()
        worker.wait()


def test_a_process_caught_in_its_exec_is_still_known_as_ours():
    # Right after Popen returns, the child may still be in its exec: /proc shows an empty command line for a
    # moment (a third of the reads on a busy 2-core box, a few in 200 on a quiet one). It is read again until it
    # shows one.
    for _ in range(200):
        child = subprocess.Popen(["sleep", "60"])
        try:
            assert runrecord.is_ours(runrecord.entry("beat", child.pid, ["sleep", "60"]))
        finally:
            child.kill()
            child.wait()
