"""manage.py backup: what a backup holds (the manifest), incremental hard links, atomic folders, retention, secrets.

These run on the real test database file (``transactional_db``: the snapshot is read through a connection of its
own, so the rows must be committed) and real files under a temporary MEDIA_ROOT.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from backups import files as backup_files
from backups import services
from backups.models import BackupRun
from jobs.files import store
from jobs.tests.ui_fixtures import add_artifact, make_job

pytestmark = pytest.mark.django_db(transaction=True)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_of(root: Path, name: str) -> dict:
    return json.loads((root / name / "manifest.json").read_text())


@pytest.fixture
def hub(member, device, media):
    """A person, a device, a finished job with two result files and a waiting job."""
    done = make_job(member, device, state="done")
    add_artifact(done, media, data=b"video-bytes" * 1000)
    add_artifact(done, media, kind="image", name="poster.png", mime="image/png", data=b"png" * 10)
    waiting = make_job(member, device, state="queued")
    return {"done": done, "waiting": waiting, "media": media}


def test_it_writes_a_dated_folder_with_the_database_files_and_a_manifest(hub, tmp_path, capsys):
    root = tmp_path / "backups"
    call_command("backup", "--to", str(root))
    (name,) = services.backup_names(root)
    assert services.NAME_RE.match(name)
    manifest = manifest_of(root, name)
    assert manifest["vendor"] == "sqlite" and manifest["hub_version"]
    assert manifest["counts"]["jobs.Job"]["rows"] == 2
    assert manifest["counts"]["accounts.User"]["rows"] == 1
    assert manifest["counts"]["jobs.JobEvent"]["rows"] == 3
    assert "0001_initial" in manifest["migrations"]["jobs"]
    files = {e["name"]: e for e in manifest["files"]}
    video = f"results/{hub['done'].owner_id}/{hub['done'].pk}/video.mp4"
    assert files[video]["sha256"] == sha(b"video-bytes" * 1000) and files[video]["size"] == 11000
    assert (root / name / "files" / video).read_bytes() == b"video-bytes" * 1000
    db = root / name / manifest["database"]["file"]
    assert manifest["database"]["sha256"] == backup_files.sha256_of(db)
    out = capsys.readouterr().out
    assert "files 2/2" in out and f"Backup {name} written" in out
    run = BackupRun.objects.get()
    assert run.ok and run.files == 2 and run.copied == 2 and run.linked == 0 and run.size_bytes > 11000


def test_a_backup_taken_under_a_wide_umask_is_the_owners_alone(hub, tmp_path):
    before = os.umask(0o022)  # manage.py backup run by hand from a login shell
    try:
        run = services.take_backup(tmp_path / "backups")
    finally:
        os.umask(before)
    folder = tmp_path / "backups" / run.name
    opened = [p for p in [folder, *folder.rglob("*")] if stat.S_IMODE(p.lstat().st_mode) & 0o077]
    assert opened == [] and stat.S_IMODE((tmp_path / "backups").stat().st_mode) == 0o700


def test_a_second_backup_copies_only_what_changed(hub, tmp_path):
    root = tmp_path / "backups"
    first = services.take_backup(root)
    folder = f"results/{hub['done'].owner_id}/{hub['done'].pk}"
    store.save_bytes(f"{folder}/poster.png", b"a new poster")  # changed (a new inode, as every save makes)
    store.save_bytes(f"{folder}/extra.wav", b"RIFF....")  # new
    second = services.take_backup(root)
    assert (second.copied, second.linked, second.files) == (2, 1, 3)
    a, b = root / first.name / "files" / folder, root / second.name / "files" / folder
    assert (a / "video.mp4").stat().st_ino == (b / "video.mp4").stat().st_ino  # shared, not copied
    assert (b / "video.mp4").stat().st_nlink == 2
    assert (a / "poster.png").stat().st_ino != (b / "poster.png").stat().st_ino
    assert (b / "poster.png").read_bytes() == b"a new poster" and (
        a / "poster.png"
    ).read_bytes() == b"png" * 10
    entries = {e["name"]: e for e in manifest_of(root, second.name)["files"]}
    assert entries[f"{folder}/poster.png"]["sha256"] == sha(b"a new poster")
    assert manifest_of(root, second.name)["previous"] == first.name


def test_it_copies_when_links_cannot_be_made(hub, tmp_path, monkeypatch):
    root = tmp_path / "backups"
    services.take_backup(root)

    def no_links(src, dst):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_links)
    second = services.take_backup(root)
    assert (second.copied, second.linked) == (2, 0)


def test_a_backup_that_dies_never_looks_finished(hub, tmp_path, monkeypatch):
    root = tmp_path / "backups"

    def dies(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(backup_files, "back_up_files", dies)
    with pytest.raises(services.BackupError, match="No space left on device"):
        services.take_backup(root)
    assert services.backup_names(root) == []
    assert [p.name for p in root.iterdir() if not p.name.startswith(".lock")] == []
    run = BackupRun.objects.get()
    assert run.ok is False and "No space left" in run.error and run.finished is not None


def test_what_a_killed_backup_left_is_removed_and_its_run_closed(hub, tmp_path):
    root = tmp_path / "backups"
    left = root / f"{services.INCOMPLETE}hub-backup-20260101-010101"
    (left / "files").mkdir(parents=True)
    (left / "database.sqlite3").write_bytes(b"half")
    stale = BackupRun.objects.create(started=timezone.now(), directory=str(root))
    assert services.backup_names(root) == []  # never offered for a restore
    run = services.take_backup(root)
    assert not left.exists() and services.backup_names(root) == [run.name]
    stale.refresh_from_db()
    assert stale.ok is False and "did not finish" in stale.error


def test_it_keeps_the_newest_backups(hub, tmp_path, settings):
    settings.HUB_BACKUP_KEEP = 2
    root = tmp_path / "backups"
    names = [services.take_backup(root).name for _ in range(3)]
    assert services.backup_names(root) == [names[2], names[1]]
    # the kept backups still hold every file (hard links outlive the removed one)
    assert all(backup_files.sha256_of(p) for p in (root / names[1] / "files").rglob("*.mp4"))


def test_the_secret_key_stays_out_unless_asked(hub, tmp_path, settings):
    root = tmp_path / "backups"
    plain = services.take_backup(root)
    everything = b"".join(p.read_bytes() for p in (root / plain.name).rglob("*") if p.is_file())
    assert settings.SECRET_KEY.encode() not in everything
    assert not (root / plain.name / services.SECRETS_FILE).exists()
    sealed = services.take_backup(root, with_secrets=True)
    secrets = root / sealed.name / services.SECRETS_FILE
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    assert f"HUB_SECRET_KEY={settings.SECRET_KEY}" in secrets.read_text()
    assert settings.SECRET_KEY not in (root / sealed.name / "manifest.json").read_text()


def test_the_command_says_where_a_backup_goes(db, settings):
    settings.HUB_BACKUP_DIR = ""
    with pytest.raises(CommandError, match="--to DIR, or set HUB_BACKUP_DIR"):
        call_command("backup")


def test_an_unwritable_folder_is_one_line(hub, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(CommandError, match=r"^Backup failed: can't write to .*a-file/backups"):
        call_command("backup", "--to", str(blocker / "backups"))
    assert BackupRun.objects.get().ok is False


def test_nothing_is_pending_so_the_upgrade_backup_is_skipped(hub, tmp_path, settings, capsys):
    settings.HUB_BACKUP_DIR = str(tmp_path / "backups")
    call_command("backup", "--if-migrations-pending")
    assert capsys.readouterr().out == "" and not (tmp_path / "backups").exists()
