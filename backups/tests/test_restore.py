"""manage.py restore: a backup comes back whole, and every refusal is one line with nothing changed."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from backups import services
from backups.models import BackupRun
from devices.models import Device
from hub.accounts.models import User
from jobs.models import Artifact, DeviceLease, Job, JobEvent
from jobs.tests.ui_fixtures import add_artifact, make_job

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def backed_up(member, device, media, tmp_path):
    done = make_job(member, device, state="done")
    add_artifact(done, media, data=b"frames" * 500)
    make_job(member, device, state="queued")
    root = tmp_path / "backups"
    run = services.take_backup(root)
    return {"root": root, "name": run.name, "media": media, "done": done}


def restore(*args: str) -> None:
    call_command("restore", *args)


def edit_manifest(folder: Path, change) -> None:
    path = folder / "manifest.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def wipe(media: Path) -> None:
    """A fresh hub: no rows, no files (what a just-migrated checkout has)."""
    Job.objects.all().delete()
    User.objects.all().delete()
    Device.objects.all().delete()
    DeviceLease.objects.all().delete()
    BackupRun.objects.all().delete()
    for path in sorted(media.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()


def test_everything_comes_back_onto_a_fresh_hub(backed_up, capsys):
    rows = (User.objects.count(), Job.objects.count(), JobEvent.objects.count(), Artifact.objects.count())
    video = backed_up["media"] / Artifact.objects.get().file.name
    wipe(backed_up["media"])
    assert not video.exists()
    restore(str(backed_up["root"]))
    assert (
        User.objects.count(),
        Job.objects.count(),
        JobEvent.objects.count(),
        Artifact.objects.count(),
    ) == rows
    assert video.read_bytes() == b"frames" * 500
    assert Job.objects.filter(state="queued").count() == 1
    run = BackupRun.objects.get(
        name=backed_up["name"]
    )  # the run was at work in its own snapshot: now finished
    assert run.ok is True and run.finished is not None
    out = capsys.readouterr().out
    assert f"Restored {backed_up['name']}" in out and "every sha256 checked" in out


def test_what_a_restore_writes_is_the_owners_alone_whatever_the_umask(backed_up):
    wipe(backed_up["media"])
    before = os.umask(0o022)  # manage.py restore run by hand from a login shell
    try:
        restore(str(backed_up["root"]))
    finally:
        os.umask(before)
    restored = list(backed_up["media"].rglob("*"))
    assert restored and [p for p in restored if stat.S_IMODE(p.lstat().st_mode) & 0o077] == []


def test_it_refuses_a_hub_that_holds_data(backed_up):
    with pytest.raises(CommandError) as err:
        restore(str(backed_up["root"]))
    assert str(err.value).startswith("Restore refused: this hub is not empty") and "--force" in str(err.value)
    assert "\n" not in str(err.value)


def test_force_replaces_what_the_hub_holds(backed_up, member, device):
    make_job(member, device, state="queued", prompt="made after the backup")
    restore(str(backed_up["root"]), "--force")
    assert not Job.objects.filter(prompt="made after the backup").exists()
    assert Job.objects.count() == 2


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda f: (f / "manifest.json").write_text("{not json"), "manifest.json is damaged"),
        (lambda f: edit_manifest(f, lambda m: m.pop("files")), "missing: files"),
        (lambda f: next((f / "files").rglob("*.mp4")).unlink(), "is missing"),
        (lambda f: next((f / "files").rglob("*.mp4")).write_bytes(b"x" * 3000), "wrong sha256"),
        (lambda f: next((f / "files").rglob("*.mp4")).write_bytes(b"short"), "the manifest says 3000"),
        (lambda f: (f / "database.sqlite3").write_bytes(b"garbage"), "database file database.sqlite3"),
    ],
    ids=["bad-json", "missing-key", "file-missing", "file-changed", "file-truncated", "database-damaged"],
)
def test_it_refuses_a_damaged_backup(backed_up, damage, said):
    folder = backed_up["root"] / backed_up["name"]
    damage(folder)
    jobs_before = Job.objects.count()
    with pytest.raises(CommandError, match="^Restore refused: damaged backup: ") as err:
        restore(str(backed_up["root"]), "--backup", backed_up["name"], "--force")
    assert said in str(err.value) and "\n" not in str(err.value)
    assert Job.objects.count() == jobs_before  # nothing changed


def test_it_refuses_a_backup_from_a_newer_hub(backed_up):
    folder = backed_up["root"] / backed_up["name"]
    edit_manifest(folder, lambda m: m["migrations"]["jobs"].append("9999_from_the_future"))
    with pytest.raises(CommandError, match=r"comes from a newer hub \(migration jobs.9999_from_the_future"):
        restore(str(backed_up["root"]), "--force")


def test_it_refuses_another_database(backed_up):
    edit_manifest(backed_up["root"] / backed_up["name"], lambda m: m.update(vendor="postgresql"))
    with pytest.raises(CommandError, match="is a postgresql backup and this hub runs on sqlite"):
        restore(str(backed_up["root"]), "--force")


def test_it_names_what_it_cannot_find(tmp_path, db):
    with pytest.raises(CommandError, match="holds no finished backup"):
        restore(str(tmp_path))
    with pytest.raises(CommandError, match="is not a folder"):
        restore(str(tmp_path / "nowhere"))


def test_the_newest_backup_is_the_default(backed_up, member, device, capsys):
    make_job(member, device, state="queued", prompt="only in the second")
    newer = services.take_backup(backed_up["root"])
    wipe(backed_up["media"])
    restore(str(backed_up["root"]))
    assert Job.objects.filter(prompt="only in the second").exists()
    assert f"Restoring {newer.name}" in capsys.readouterr().out
    restore(str(backed_up["root"]), "--backup", backed_up["name"], "--force")
    assert not Job.objects.filter(prompt="only in the second").exists()


def test_a_different_secret_key_is_named_with_where_to_find_the_right_one(
    member, device, media, tmp_path, settings, capsys
):
    root = tmp_path / "backups"
    run = services.take_backup(root, with_secrets=True)
    wipe(media)
    settings.SECRET_KEY = "another-hub-s-key"
    restore(str(root))
    out = capsys.readouterr().out
    assert (
        "HUB_SECRET_KEY differs" in out
        and f"copy the lines of {root / run.name / 'secrets.env'} into .env" in out
    )


def test_a_backup_and_a_restore_are_in_the_audit_log(backed_up):
    from hub.accounts.models import AuditEntry

    made = AuditEntry.objects.get(action="backup-made")
    assert (made.target_name, made.target_kind, made.data["trigger"]) == (
        backed_up["name"],
        "backuprun",
        "manual",
    )
    wipe(backed_up["media"])
    restore(str(backed_up["root"]))
    restored = AuditEntry.objects.get(action="backup-restored")
    assert restored.target_name == backed_up["name"] and restored.data["forced"] is False
    # The log came back with the database (the backup's own entry was written after its snapshot).
    assert AuditEntry.objects.filter(action="person-created").exists()
    assert not AuditEntry.objects.filter(action="backup-made").exists()
