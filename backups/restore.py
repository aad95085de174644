"""Putting a backup back onto a fresh hub: the database, then every result file (each sha256 checked), then the
migrations this checkout adds. Run with the hub stopped.

Refused, each with one line (``RestoreRefused``): a hub that already holds data (unless forced), a backup made by
a newer hub (a migration this checkout does not have), a damaged backup (manifest unreadable, a listed file
missing or with the wrong sha256: all checked before anything is changed), and a backup of another database
vendor (SQLite into PostgreSQL or back).

After a restore the queue resumes by the usual restart rules, when the hub starts: waiting jobs are dispatched by
reconcile's idle-queue sweep; a poll-style render (Tiiny video, 3D) keeps its device-side id, so reconcile's
``revive_polls`` polls that same render again (it is never submitted twice while the device still has it); a
render held by a worker (blocking, stream) had a lease that has lapsed, so ``recover_orphans`` marks it
interrupted and it is retried once, as after any crash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from backups import database
from backups import files as backup_files
from backups import manifest as backup_manifest
from backups.models import BackupRun
from backups.services import SECRETS_FILE, backup_names
from hub import atrest
from hub.accounts import audit

#: Rows a just-migrated hub already has: it counts as empty with them.
# A fresh hub has these too (the audit log: a failed sign-in, the backup just taken): they don't make it "not empty".
NOT_HUB_DATA = {
    "contenttypes.ContentType", "auth.Permission", "sessions.Session", "backups.BackupRun", "accounts.AuditEntry",
}  # fmt: skip


class RestoreRefused(Exception):
    """The restore did not start (nothing was changed); ``str()`` is one line."""


@dataclass
class Restored:
    name: str
    rows: int
    files: int
    bytes: int
    migrated: bool
    secret_key_matches: bool | None  # None: the backup names no key
    secrets_file: Path | None  # the backup's secrets.env, when it was taken --with-secrets


def choose(root: Path, name: str | None) -> Path:
    """The backup to restore: the one named, else the newest finished one in ``root``."""
    if not root.is_dir():
        raise RestoreRefused(f"{root} is not a folder")
    if name:
        folder = root / name
        if not folder.is_dir():
            raise RestoreRefused(f"there is no backup {name!r} in {root}")
        return folder
    names = backup_names(root)
    if not names:
        raise RestoreRefused(f"{root} holds no finished backup (hub-backup-… with a manifest.json)")
    return root / names[0]


def hub_has_data() -> list[str]:
    """The models of this hub that hold rows (those a fresh migrate makes left out)."""
    return [
        label for label, c in database.live_row_counts().items() if c["rows"] and label not in NOT_HUB_DATA
    ]


def check(folder: Path, *, force: bool) -> dict:
    """Every refusal, before anything changes; returns the manifest."""
    try:
        manifest = backup_manifest.read(folder)
    except backup_manifest.ManifestError as exc:
        raise RestoreRefused(f"damaged backup: {exc}") from None
    if manifest["vendor"] != database.vendor():
        raise RestoreRefused(
            f"{folder.name} is a {manifest['vendor']} backup and this hub runs on {database.vendor()}: "
            "restore it into a hub on the same database"
        )
    if unknown := backup_manifest.unknown_migrations(manifest):
        raise RestoreRefused(
            f"{folder.name} comes from a newer hub (migration {unknown[0]} is unknown here"
            f"{f' and {len(unknown) - 1} more' if len(unknown) > 1 else ''}): update this checkout first"
        )
    if not force and (holding := hub_has_data()):
        raise RestoreRefused(
            f"this hub is not empty ({', '.join(holding[:3])}{' …' if len(holding) > 3 else ''} hold rows): "
            "restore onto a fresh one, or add --force to replace what it holds"
        )
    try:
        backup_manifest.verify(folder, manifest)
    except backup_manifest.ManifestError as exc:
        raise RestoreRefused(f"damaged backup: {exc}") from None
    return manifest


def _check_counts(manifest: dict) -> int:
    """The restored database holds what the manifest counted (before this checkout's migrations run)."""
    live = database.live_row_counts({label: c["table"] for label, c in manifest["counts"].items()})
    for label, c in manifest["counts"].items():
        got = live.get(label, {}).get("rows")
        if got != c["rows"]:
            raise RuntimeError(f"restored {label}: {got} rows, the manifest counted {c['rows']}")
    return sum(c["rows"] for c in manifest["counts"].values())


def _settle_runs(manifest: dict) -> None:
    """The run that took this backup was at work in its own snapshot: it finished well. Others left at work in
    the snapshot never will."""
    finished = parse_datetime(manifest.get("finished") or "") or timezone.now()
    BackupRun.objects.filter(ok__isnull=True, name=manifest.get("name", "")).update(
        ok=True, finished=finished, files=len(manifest["files"])
    )
    BackupRun.objects.filter(ok__isnull=True).update(
        ok=False, finished=timezone.now(), error="did not finish (the hub was restored from a backup)"
    )


def restore(
    root: Path | str,
    *,
    name: str | None = None,
    force: bool = False,
    progress: Callable[[backup_files.FileTally], None] | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> Restored:
    folder = choose(Path(root).expanduser(), name)
    database.prepare_target()
    manifest = check(folder, force=force)
    say(f"Restoring {folder.name} (hub {manifest['hub_version']}, {len(manifest['files'])} files) …")
    database.restore(folder / manifest["database"]["file"])
    rows = _check_counts(manifest)
    say(f"database restored: {rows} rows")
    tally = backup_files.restore_files(folder, manifest["files"], progress=progress)
    # The restored database and files are the hub's alone (hub.atrest), though a restore is run by hand from a shell
    # whose umask may let others read what it writes.
    for kept in dict.fromkeys((Path(settings.DATA_DIR), Path(settings.MEDIA_ROOT))):
        atrest.tighten(kept)
    pending = database.pending_migrations()
    if pending:
        say(f"applying {pending} migration(s) this checkout adds …")
        call_command("migrate", interactive=False, verbosity=0)
    _settle_runs(manifest)
    # Into the restored database: the log it brought back, and this restore on top.
    audit.record(audit.Action.BACKUP_RESTORED, target_name=folder.name,
                 data={"folder": str(folder.parent), "rows": rows, "files": tally.done, "forced": force})  # fmt: skip
    fingerprint = manifest.get("secret_key_fingerprint")
    return Restored(
        name=folder.name,
        rows=rows,
        files=tally.done,
        bytes=tally.done_bytes,
        migrated=bool(pending),
        secret_key_matches=None
        if not fingerprint
        else fingerprint == backup_manifest.secret_fingerprint(settings.SECRET_KEY),
        secrets_file=folder / SECRETS_FILE if (folder / SECRETS_FILE).is_file() else None,
    )
