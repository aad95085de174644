"""Start-up refuses a data folder it cannot write, with one line naming it: ``manage.py check`` (hub.E001), the web
server, the Celery worker, beat and ``make up``'s script.

We run as root, for whom a chmod 0500 folder is still writable, so the unusable folders are real in another way: a
path under a regular file (it can never be created), and a read-only tmpfs mounted for the test (when the machine
allows mounting; skipped otherwise)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hub.redis_server import free_port
from hub.testing import tmpfs

REPO = Path(__file__).resolve().parents[2]
ENV = {
    "PATH": "/usr/bin:/bin",
    "HUB_SECRET_KEY": "k",
    # set, so that make up's script writes no .env into the checkout
    "HUB_EMULATOR_API_KEY": "test",
    "HUB_VAPID_PRIVATE_KEY": "test",
    "HUB_REDIS_PASSWORD": "test",
    "REDIS_URL": "redis://127.0.0.1:1/0",
}


@pytest.fixture
def under_a_file(tmp_path) -> Path:
    (tmp_path / "afile").write_text("not a folder")
    return tmp_path / "afile" / "data"


@pytest.fixture
def read_only(tmp_path):
    with tmpfs(tmp_path / "ro", "ro,size=1m") as folder:
        yield folder


def run(args: list[str], data_dir: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        args,
        cwd=REPO,
        env={**ENV, "HUB_DATA_DIR": str(data_dir)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_check_names_a_folder_that_can_never_be_created(under_a_file):
    from hub.disk import unwritable_reason

    assert "cannot be created" in unwritable_reason(under_a_file)
    result = run([sys.executable, "manage.py", "check"], under_a_file)
    assert result.returncode != 0
    assert f"(hub.E001) the data folder {under_a_file} cannot be used: it cannot be created" in result.stderr


def test_the_check_names_a_read_only_folder(read_only):
    result = run([sys.executable, "manage.py", "check"], read_only)
    assert result.returncode != 0
    assert (
        f"(hub.E001) the data folder {read_only} cannot be used: the hub cannot write in it" in result.stderr
    )
    assert "Read-only file system" in result.stderr


def test_a_usable_folder_passes_and_is_made(tmp_path):
    result = run([sys.executable, "manage.py", "check"], tmp_path / "new")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "new" / "media").is_dir()
    assert not list((tmp_path / "new").glob(".hub-write-check-*"))


@pytest.mark.integration
@pytest.mark.parametrize(
    "args",
    [
        [sys.executable, "-m", "hub.webserver", "--port", "0"],
        [sys.executable, "-m", "celery", "-A", "hub", "worker", "--pool=solo", "--without-gossip"],
        [sys.executable, "-m", "celery", "-A", "hub", "beat"],
    ],
    ids=["web", "worker", "beat"],
)
def test_each_process_stops_with_one_line_naming_the_folder(args, under_a_file):
    if args[2] == "hub.webserver":
        args = [*args[:-1], str(free_port())]
    result = run(args, under_a_file)
    assert result.returncode == 1, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith(
        f"tiiny-hub: the data folder {under_a_file} cannot be used: it cannot be created"
    )
    if args[2] == "hub.webserver":
        assert len(lines) == 1, lines  # nothing before it: no worker process was started
    assert "Traceback" not in result.stderr


@pytest.mark.integration
def test_make_ups_script_stops_with_one_line(read_only):
    env_file = REPO / ".env"
    had_env = env_file.exists()
    result = subprocess.run(
        [sys.executable, "scripts/up.py"],
        cwd=REPO,
        env={**ENV, "HUB_DATA_DIR": str(read_only), "HUB_PORT": str(free_port())},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [
        f"tiiny-hub: the data folder {read_only} cannot be used: the hub cannot write in it (Read-only file "
        "system). Set HUB_DATA_DIR to a folder the hub may write."
    ]
    assert env_file.exists() == had_env  # it wrote nothing into the checkout
