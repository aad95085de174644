"""Taking a backup: a dated folder under DIR with the database snapshot, the result files and ``manifest.json``.

A backup is written into ``DIR/.incomplete-<name>`` and renamed to ``DIR/<name>`` only once everything (the
manifest last) is on disk, so a killed backup never looks finished; the next run removes what it left. One backup
at a time per DIR (a lock file). After a good backup, the oldest beyond ``HUB_BACKUP_KEEP`` are removed: files
are hard links shared between backups, so removing an old backup frees only what no newer one holds.

Each run is recorded (``BackupRun``) for the health page and ``/metrics``; a failed daily backup is told to the
household channels (``notify``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import logging
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from django.conf import settings
from django.db import connection
from django.db.models import Q, Subquery
from django.utils import timezone

from backups import database
from backups import files as backup_files
from backups import manifest as backup_manifest
from backups.models import BackupRun
from hub import atrest, media_storage
from hub.accounts import audit
from hub.version import __version__, commit
from notify.models import Event
from notify.services import notify_event

logger = logging.getLogger("backups")

PREFIX = "hub-backup-"
INCOMPLETE = ".incomplete-"
SECRETS_FILE = "secrets.env"
NAME_RE = re.compile(rf"^{PREFIX}\d{{8}}-\d{{6}}(-\d+)?$")


class BackupError(Exception):
    """A backup could not be taken; ``str()`` is one line."""


# -- the backups in a folder ---------------------------------------------------------------------------------------
def backup_names(root: Path) -> list[str]:
    """The finished backups in ``root`` (a manifest present), newest first."""
    try:
        entries = list(os.scandir(root))
    except (FileNotFoundError, NotADirectoryError):
        return []
    names = [e.name for e in entries if NAME_RE.match(e.name) and (Path(e.path) / "manifest.json").is_file()]
    return sorted(names, key=_sort_key, reverse=True)


def _sort_key(name: str) -> tuple[str, int]:
    rest = name.removeprefix(PREFIX)  # YYYYmmdd-HHMMSS, then -N for a second backup in the same second
    return rest[:15], int(rest[16:] or 1)


def _new_name(root: Path, now: dt.datetime) -> str:
    base = f"{PREFIX}{timezone.localtime(now):%Y%m%d-%H%M%S}"
    name, n = base, 1
    while (root / name).exists() or (root / f"{INCOMPLETE}{name}").exists():
        n += 1
        name = f"{base}-{n}"
    return name


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    with open(root / ".lock", "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BackupError(
                f"another backup into {root} is at work; try again when it has finished"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _clear_incomplete(root: Path) -> None:
    """What a killed backup left (we hold the lock, so no backup is writing there now)."""
    for entry in os.scandir(root):
        if entry.name.startswith(INCOMPLETE) and entry.is_dir(follow_symlinks=False):
            logger.warning("removing %s, left by a backup that did not finish", entry.path)
            backup_files.remove_tree(Path(entry.path))


def prune(root: Path, keep: int) -> list[str]:
    """Remove the finished backups beyond the newest ``keep``; returns their names."""
    old = backup_names(root)[keep:]
    for name in old:
        backup_files.remove_tree(root / name)
    return old


# -- taking one ----------------------------------------------------------------------------------------------------
def _previous(root: Path) -> tuple[Path | None, dict[str, dict]]:
    for name in backup_names(root):
        try:
            data = backup_manifest.read(root / name)
        except backup_manifest.ManifestError:
            continue
        return root / name, {e["name"]: e for e in data["files"] if isinstance(e, dict) and "name" in e}
    return None, {}


def _write_secrets(folder: Path) -> None:
    """The secret key (and what else seals or signs with it) in a file only its owner may read."""
    lines = [f"HUB_SECRET_KEY={settings.SECRET_KEY}"]
    if settings.SECRET_KEY_FALLBACKS:
        lines.append(f"HUB_SECRET_KEY_FALLBACKS={','.join(settings.SECRET_KEY_FALLBACKS)}")
    vapid = settings.NOTIFY_VAPID_PRIVATE_KEY
    if vapid:
        lines.append(f"HUB_VAPID_PRIVATE_KEY={vapid}")
    fd = os.open(folder / SECRETS_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write("# Tiiny Hub secrets: device API keys and channel secrets are sealed with this key.\n")
        fh.write("\n".join(lines) + "\n")
    vapid_file = Path(settings.DATA_DIR) / "vapid-private.key"
    if not vapid and vapid_file.is_file():
        fd = os.open(folder / vapid_file.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(vapid_file.read_bytes())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _backup_size(tally: backup_files.FileTally, db_file: Path) -> int:
    return db_file.stat().st_size + sum(e["size"] for e in tally.entries)


def _write_backup(run: BackupRun, tmp: Path, with_secrets: bool, progress) -> tuple[dict, int]:
    """The backup's content into ``tmp``: database first (the files it names are then all on disk), files,
    secrets when asked, the manifest last. Returns (manifest, size)."""
    snap = database.snapshot(tmp)
    db_file = snap.file
    previous_root, previous_files = _previous(tmp.parent)
    tally = backup_files.back_up_files(
        tmp, previous_root=previous_root, previous_files=previous_files, progress=progress
    )
    if with_secrets:
        _write_secrets(tmp)
    manifest = {
        "format": backup_manifest.FORMAT,
        "hub_version": __version__,
        "commit": commit(),
        "name": run.name,
        "created": run.started.isoformat(),
        "finished": timezone.now().isoformat(),
        "vendor": database.vendor(),
        "database": {
            "file": db_file.name,
            "size": db_file.stat().st_size,
            "sha256": backup_files.sha256_of(db_file),
        },
        "migrations": snap.migrations,
        "counts": snap.counts,
        # Where the files came from: file: (the data folder) or the bucket (its objects are in files/ all the same).
        "store": media_storage.describe(backup_files.storage()),
        "files": tally.entries,
        "previous": previous_root.name if previous_root else None,
        "copied": tally.copied,
        "linked": tally.linked,
        "with_secrets": with_secrets,
        "secret_key_fingerprint": backup_manifest.secret_fingerprint(settings.SECRET_KEY),
    }
    backup_manifest.write(tmp, manifest)
    run.files, run.copied, run.linked, run.copied_bytes = (
        len(tally.entries),
        tally.copied,
        tally.linked,
        tally.copied_bytes,
    )
    return manifest, _backup_size(tally, db_file)


def _mark_abandoned(root: Path) -> None:
    """Runs into ``root`` left "at work" by a process that died (one backup per DIR at a time: we hold its lock)."""
    BackupRun.objects.filter(ok__isnull=True, directory=str(root)).update(
        ok=False, finished=timezone.now(), error="did not finish (its process stopped)"
    )


def take_backup(
    root: Path | str,
    *,
    with_secrets: bool = False,
    trigger: str = BackupRun.Trigger.MANUAL,
    progress: Callable[[backup_files.FileTally], None] | None = None,
    keep: int | None = None,
) -> BackupRun:
    """Take a backup into ``root``; returns its run (``ok`` True). Raises BackupError (the run recorded failed)."""
    root = Path(root).expanduser()
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        probe = root / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        _record_refused(root, trigger, f"can't write to {root}: {exc.strerror or exc}")
        raise BackupError(f"can't write to {root}: {exc.strerror or exc}") from None
    with _locked(root):
        _clear_incomplete(root)
        recorded = _recording()
        if recorded:
            _mark_abandoned(root)
        now = timezone.now()
        run = BackupRun(started=now, directory=str(root), name=_new_name(root, now), trigger=trigger)
        if recorded:
            run.save()
        tmp = root / f"{INCOMPLETE}{run.name}"
        try:
            tmp.mkdir()
            _, size = _write_backup(run, tmp, with_secrets, progress)
            # A backup holds the database (sessions) and everyone's files: the owner's alone, as the data folder
            # is, whatever the umask of the process that took it (manage.py backup by hand).
            atrest.tighten(tmp)
            os.rename(tmp, root / run.name)
            _fsync_dir(root)
        except Exception as exc:
            backup_files.remove_tree(tmp)
            message = _one_line(exc)
            _finish(run, ok=False, error=message)
            raise BackupError(message) from exc
        _finish(run, ok=True, size=size)
        if recorded:
            audit.record(audit.Action.BACKUP_MADE, target=run, target_name=run.name,
                         data={"trigger": trigger, "bytes": size, "folder": str(root)})  # fmt: skip
    removed = prune(root, settings.HUB_BACKUP_KEEP if keep is None else keep)
    if removed:
        logger.info("removed %d old backup(s) from %s: %s", len(removed), root, ", ".join(removed))
    return run


def _recording() -> bool:
    """Runs are recorded once the backups table exists (the backup before the migration that makes it is not)."""
    return BackupRun._meta.db_table in connection.introspection.table_names()


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:500]


def _finish(run: BackupRun, *, ok: bool, size: int = 0, error: str = "") -> None:
    connection.close_if_unusable_or_obsolete()
    run.ok, run.finished, run.size_bytes, run.error = ok, timezone.now(), size, error
    if run.pk is not None:
        run.save()


def _record_refused(root: Path, trigger: str, error: str) -> None:
    if not _recording():
        return
    now = timezone.now()
    BackupRun.objects.create(
        started=now, finished=now, directory=str(root), trigger=trigger, ok=False, error=error[:500]
    )


# -- what the health page and /metrics read ------------------------------------------------------------------------
def last_runs() -> tuple[BackupRun | None, BackupRun | None]:
    """(the newest finished backup run, the newest good one), in one query."""
    newest = BackupRun.objects.filter(finished__isnull=False).order_by("-finished", "-id").values("pk")[:1]
    good = BackupRun.objects.filter(ok=True).order_by("-finished", "-id").values("pk")[:1]
    rows = list(BackupRun.objects.filter(Q(pk__in=Subquery(newest)) | Q(pk__in=Subquery(good))))
    last = max(rows, key=lambda r: (r.finished, r.pk), default=None)
    best = max((r for r in rows if r.ok), key=lambda r: (r.finished, r.pk), default=None)
    return last, best


# -- the daily backup ------------------------------------------------------------------------------------------------
def daily_backup() -> str:
    """Beat's daily entry: a backup into ``HUB_BACKUP_DIR`` when it is set; a failure tells the household."""
    if not settings.HUB_BACKUP_DIR:
        return "off"
    try:
        run = take_backup(settings.HUB_BACKUP_DIR, trigger=BackupRun.Trigger.NIGHTLY)
    except BackupError as exc:
        logger.error("daily backup into %s failed: %s", settings.HUB_BACKUP_DIR, exc)
        _tell_household_failed()
        return "failed"
    return run.name


def _tell_household_failed() -> None:
    failed = BackupRun.objects.filter(ok=False).order_by("-finished", "-id").first()
    try:
        notify_event(Event.BACKUP_FAILED, key=f"{Event.BACKUP_FAILED}:{failed.pk if failed else 0}")
    except Exception:
        logger.exception("the household could not be told that the backup failed")
