"""``manage.py backup [--to DIR] [--with-secrets] [--if-migrations-pending]``: a dated backup under DIR."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.files.storage import default_storage
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from backups import database
from backups.files import FileTally, Throttle
from backups.models import BackupRun
from backups.restore import hub_has_data
from backups.services import BackupError, take_backup
from hub import media_storage


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


class Command(BaseCommand):
    help = (
        "Back up the database (a consistent snapshot, taken while the hub runs) and the result files into a new "
        "dated folder under DIR (HUB_BACKUP_DIR by default), sharing unchanged files with the previous backup."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--to", metavar="DIR", help="the folder backups go into (default: HUB_BACKUP_DIR)"
        )
        parser.add_argument(
            "--with-secrets",
            action="store_true",
            help="also write the secret key (it seals device API keys and channel secrets) into a 0600 file",
        )
        parser.add_argument(
            "--if-migrations-pending",
            action="store_true",
            help="only when this hub holds data and has migrations to apply (make up runs this before migrating)",
        )

    def handle(self, *args, **options):
        try:
            self._handle(**options)
        except DatabaseError as exc:
            raise CommandError(f"Backup failed: the database can't be read ({_first_line(exc)})") from None

    def _handle(self, *, to=None, with_secrets=False, if_migrations_pending=False, **options):
        target = to or settings.HUB_BACKUP_DIR
        trigger = BackupRun.Trigger.MANUAL
        if if_migrations_pending:
            if not self._upgrade_wants_backup():
                return
            if not target:
                self.stdout.write(
                    "Migrations are about to change this hub's database and no backup is set up: to keep one "
                    "first, stop and run `HUB_BACKUP_DIR=/path/to/backups make up` "
                    "(or `manage.py backup --to DIR`). Going on without a backup."
                )
                return
            trigger = BackupRun.Trigger.UPGRADE
        if not target:
            raise CommandError("Say where the backup goes: --to DIR, or set HUB_BACKUP_DIR")
        try:
            run = take_backup(
                Path(target), with_secrets=with_secrets, trigger=trigger, progress=Throttle(self._progress)
            )
        except BackupError as exc:
            raise CommandError(f"Backup failed: {exc}") from None
        self.stdout.write(
            f"Backup {run.name} written to {target}: {human_bytes(run.size_bytes)}, {run.files} file{'s' * (run.files != 1)} "
            f"({run.copied} copied, {run.linked} shared with the previous backup)."
        )
        where = media_storage.describe(default_storage)
        if where != "file:":
            self.stdout.write(
                f"Its files are the objects of the result store {where}, copied into the backup."
            )
        if with_secrets:
            self.stdout.write(
                "The secret key is in its secrets.env (readable by this user only): keep it safe."
            )

    def _upgrade_wants_backup(self) -> bool:
        if not database.exists():
            return False  # a first start: no database yet, nothing to keep
        pending = database.pending_migrations()
        if not pending or not hub_has_data():
            return False
        self.stdout.write(f"{pending} migration(s) to apply to a hub that holds data.")
        return True

    def _progress(self, tally: FileTally) -> None:
        self.stdout.write(
            f"  files {tally.done}/{tally.total} · {human_bytes(tally.done_bytes)} of "
            f"{human_bytes(tally.total_bytes)} ({tally.copied} copied, {tally.linked} shared)"
        )
