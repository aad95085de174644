"""``make worker`` (scripts/worker.py): a Celery worker alone, against the hub's database, Redis and secret.

It refuses in one line what it can't run with (a missing setting, a Redis that doesn't answer, a device name that
is no device), starts the profile's worker under keepalive with its output in ``<data dir>/logs/worker.log``, and
stops (SIGTERM, Ctrl-C) leaving nothing running. Its real work, driving a device from its own data folder, is in
jobs/tests/queue/test_three_machines.py.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hub import profile
from hub.testing import BASE_DIR, Proc, child_env, process_tree, wait_for

SCRIPT = [sys.executable, str(BASE_DIR / "scripts" / "worker.py")]


def umask_of(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return line.split()[1]
    return ""


def run(env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(SCRIPT, env=env, capture_output=True, text=True, timeout=timeout, cwd=BASE_DIR)


def one_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, result
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.django_db
def test_it_refuses_without_the_hubs_database_and_redis(tmp_path):
    env = child_env(HUB_DATA_DIR=str(tmp_path))
    for name in ("DATABASE_URL", "REDIS_URL"):
        env.pop(name)
    line = one_line(run(env))
    assert line.startswith("tiiny-hub: make worker needs DATABASE_URL") and "REDIS_URL" in line
    assert not (tmp_path / "logs").exists()  # nothing started


@pytest.mark.django_db
def test_it_refuses_a_redis_that_does_not_answer(tmp_path):
    line = one_line(run(child_env(HUB_DATA_DIR=str(tmp_path), REDIS_URL="redis://127.0.0.1:9/0")))
    assert "REDIS_URL does not answer" in line


@pytest.mark.django_db(transaction=True)
def test_it_refuses_a_device_name_that_is_no_device(tmp_path, device):
    line = one_line(run(child_env(HUB_DATA_DIR=str(tmp_path), HUB_WORKER_DEVICES="Pocket,Garage")))
    assert "HUB_WORKER_DEVICES names no device called 'Garage' (devices: Pocket)" in line
    assert not (tmp_path / "logs").exists()


def test_it_runs_the_profiles_worker_alone():
    for name in profile.PROFILES:
        chosen = profile.choose(name)
        alone = chosen.worker_command(python="py", wrap=["keep"])
        assert alone[:6] == ["keep", "py", "-m", "celery", "-A", "hub"] and alone[6] == "worker"
        assert f"--concurrency={chosen.pool}" in alone and not any("beat" in a for a in alone)
        if not chosen.beat_in_worker:  # make up's worker is the same command
            assert (
                chosen.commands(host="h", port=1, data_dir=Path("d"), python="py", wrap=["keep"])["worker"]
                == alone
            )


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_it_logs_to_its_data_folder_and_a_stop_leaves_nothing_running(tmp_path, device):
    proc = Proc(
        "make-worker",
        SCRIPT,
        child_env(HUB_DATA_DIR=str(tmp_path), HUB_WORKER_DEVICES="Pocket"),
        tmp_path / "console",
    ).start()
    log = tmp_path / "logs" / "worker.log"
    try:
        wait_for(
            lambda: log.exists() and " ready." in log.read_text(), timeout=60, what="the worker", proc=proc
        )
        tree = process_tree(proc.process.pid)
        assert len(tree) >= 4  # this script, keepalive, Celery's main process and its pool
        assert f".> device.{device.pk} " in log.read_text()  # it consumes its device's queue
        # Started from this test's umask (022), everything it runs writes files only its owner may read.
        assert {umask_of(p) for p in tree} == {"0077"}
        assert oct(log.stat().st_mode & 0o777) == "0o600"
        proc.process.send_signal(signal.SIGTERM)
        assert proc.process.wait(timeout=30) == 0
        assert "worker stopped at" in proc.log_text()
        wait_for(
            lambda: not [p for p in tree if Path(f"/proc/{p}").exists()],
            timeout=10,
            what="every process to stop",
        )
    finally:
        proc.kill()
