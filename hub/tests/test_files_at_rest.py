"""Issue 34 item 6: the data folder and everything in it are the hub's alone (0700 folders, 0600 files), an existing
folder others could read is tightened by ``make up`` in one line, and start-up warns when it finds one open again.

Every test here runs with the umask most accounts have (022): what the hub makes must be private whatever it is.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage
from django.db import connection
from django.db.backends.sqlite3.base import DatabaseWrapper

from hub import atrest
from hub.checks import check_private_files
from hub.disk import data_folder_problem
from hub.testing import load_script
from hub.tests.test_up_supervision import MakeUp, _kill_all, _wait_for, hub_processes, manifest_kept, up_env
from hub.tests.test_worker_script import umask_of

__all__ = ["manifest_kept"]  # a fixture, used by name


@pytest.fixture
def wide_umask():
    before = os.umask(0o022)
    yield
    os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def open_to_others(folder: Path) -> list[str]:
    """Everything under ``folder`` (itself included) that group or others may use, with its mode."""
    found = []
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink() and mode(path) & 0o077:
            found.append(f"{path.relative_to(folder)} {oct(mode(path))}")
    return found


def an_open_tree(root: Path) -> None:
    """A data folder as hubs before this one left it: 0755 folders, 0644 files."""
    (root / "logs").mkdir(parents=True)
    (root / "media" / "results" / "1").mkdir(parents=True)
    for name in ("hub.sqlite3", "logs/web.log", "media/results/1/video.mp4"):
        (root / name).write_bytes(b"")  # an empty file is an empty SQLite database
        (root / name).chmod(0o644)
    for folder in (
        root,
        root / "logs",
        root / "media",
        root / "media" / "results",
        root / "media" / "results" / "1",
    ):
        folder.chmod(0o755)


@pytest.mark.integration
def test_make_up_makes_every_file_private_and_tightens_what_an_older_hub_left_open(
    tmp_path, manifest_kept, wide_umask
):
    data = tmp_path / "data"
    an_open_tree(data)
    hub = MakeUp(up_env(data, HUB_DEVICE="emulator", HUB_PROFILE="small"))
    try:
        text = hub.wait_up()
        assert (
            "was readable by other users of this machine: made 8 file(s) and folder(s) the hub's alone"
            in text
        )
        _wait_for(lambda: (data / "run" / "up.json").exists(), what="the run record")
        _wait_for(lambda: (data / "emulator").is_dir(), what="the emulator's folder")
        created = {p.relative_to(data).as_posix() for p in data.rglob("*")}
        assert {"hub.sqlite3", "logs/web.log", "logs/up.log", "run/up.json", "emulator"} <= created, created
        assert open_to_others(data) == []
        assert mode(data) == 0o700 and mode(data / "logs" / "web.log") == 0o600
        # Every process make up started (make itself aside: it ran up.py) has the private umask.
        started = [p for p in hub_processes(data) if Path(f"/proc/{p}/comm").read_text().strip() != "make"]
        assert len(started) >= 8 and {umask_of(p) for p in started} == {"0077"}
    finally:
        hub.stop()
        _kill_all(hub_processes(data))
    assert open_to_others(data) == []  # what was written while stopping too
    again = MakeUp(up_env(data, HUB_DEVICE="none", HUB_PROFILE="small"))
    try:
        assert "readable by other users" not in again.wait_up()  # nothing to tighten: no line
    finally:
        again.stop()
        _kill_all(hub_processes(data))


def test_the_folder_preparation_tightens_an_open_tree_once_in_one_line(tmp_path, wide_umask, capsys):
    up = load_script("up")
    an_open_tree(tmp_path / "data")
    up.prepare_data_folder(tmp_path / "data")
    lines = capsys.readouterr().out.strip().splitlines()
    assert (
        len(lines) == 1
        and "made 8 file(s) and folder(s) the hub's alone (., hub.sqlite3, logs and 5 more)" in lines[0]
    )
    assert open_to_others(tmp_path / "data") == []
    assert (
        mode(tmp_path / "data" / "logs" / "web.log") == 0o600 and mode(tmp_path / "data" / "media") == 0o700
    )
    up.prepare_data_folder(tmp_path / "data")
    assert capsys.readouterr().out == ""
    up.prepare_data_folder(tmp_path / "new")
    assert mode(tmp_path / "new") == 0o700 and capsys.readouterr().out == ""


def test_start_up_warns_when_the_folder_is_open_again(tmp_path, settings):
    settings.DATA_DIR = tmp_path
    (tmp_path / "logs").mkdir(mode=0o700)
    (tmp_path / "logs" / "web.log").write_bytes(b"")
    (tmp_path / "hub.sqlite3").write_bytes(b"")
    for path in (tmp_path / "logs" / "web.log", tmp_path / "hub.sqlite3"):
        path.chmod(0o600)
    tmp_path.chmod(0o700)
    assert check_private_files() == []
    (tmp_path / "logs" / "web.log").chmod(0o644)
    tmp_path.chmod(0o755)
    (warning,) = check_private_files()
    assert warning.id == "hub.W002"
    assert (
        f"other users of this machine may read the hub's files in {tmp_path} (., logs/web.log)" in warning.msg
    )
    assert f"chmod -R go-rwx {tmp_path}" in warning.msg


def test_a_manage_py_check_prints_the_warning(tmp_path):
    data = tmp_path / "data"
    an_open_tree(data)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "DJANGO", "DATABASE_URL"))}
    env.update(
        HUB_DATA_DIR=str(data), HUB_SECRET_KEY="x", HUB_EMULATOR_API_KEY="x", HUB_VAPID_PRIVATE_KEY="x"
    )
    out = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        "hub.W002" in out.stderr + out.stdout
        and "(., hub.sqlite3, logs, media and 1 more)" in out.stderr + out.stdout
    )


def test_logs_are_private_whatever_the_umask(tmp_path, wide_umask):
    router = load_script("up").LogRouter(tmp_path / "logs")
    router.note("a line")
    router.close()
    assert mode(tmp_path / "logs") == 0o700 and mode(tmp_path / "logs" / "up.log") == 0o600


def test_a_sqlite_database_made_under_a_wide_umask_is_private_with_its_wal(tmp_path, wide_umask, db):
    wrapper = DatabaseWrapper(
        {**connection.settings_dict, "NAME": str(tmp_path / "hub.sqlite3")}, alias="atrest"
    )
    try:
        wrapper.connect()
        with wrapper.cursor() as cursor:
            cursor.execute("CREATE TABLE t (x int)")
            cursor.execute("INSERT INTO t VALUES (1)")
        assert mode(tmp_path / "hub.sqlite3") == 0o600
        assert mode(tmp_path / "hub.sqlite3-wal") == 0o600 and mode(tmp_path / "hub.sqlite3-shm") == 0o600
    finally:
        wrapper.close()


def test_saved_media_is_private_whatever_the_umask(tmp_path, wide_umask):
    storage = FileSystemStorage(location=tmp_path / "media")
    name = storage.save("results/7/42/video.mp4", ContentFile(b"frames"))
    assert mode(tmp_path / "media" / name) == 0o600
    assert mode(tmp_path / "media" / "results" / "7") == 0o700


def test_tighten_leaves_links_and_their_targets_alone(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"")
    outside.chmod(0o644)
    (tmp_path / "data").mkdir(mode=0o700)
    (tmp_path / "data" / "link").symlink_to(outside)
    assert atrest.tighten(tmp_path / "data") == []
    assert mode(outside) == 0o644


def test_the_status_page_warns_when_the_folder_is_open(admin_client, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    tmp_path.chmod(0o700)
    assert 'id="health-files-open"' not in admin_client.get("/health/").content.decode()
    tmp_path.chmod(0o755)
    page = admin_client.get("/health/").content.decode()
    assert f"Not private: other users of this machine may read the hub&#x27;s files in {tmp_path} (.)" in page


def test_the_start_up_check_makes_a_missing_folder_private(settings, tmp_path, wide_umask):
    settings.DATA_DIR = tmp_path / "data"
    settings.MEDIA_ROOT = tmp_path / "data" / "media"
    assert data_folder_problem() is None
    assert mode(tmp_path / "data") == 0o700 and mode(tmp_path / "data" / "media") == 0o700
    assert check_private_files() == []
