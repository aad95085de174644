"""``manage.py restore DIR [--backup NAME] [--force]``: put a backup back onto a fresh hub (stopped)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from backups.files import FileTally, Throttle
from backups.management.commands.backup import human_bytes
from backups.restore import RestoreRefused, restore


class Command(BaseCommand):
    help = (
        "Restore the newest backup in DIR (or the one named) onto this hub: its database, every result file "
        "(each sha256 checked) and then this checkout's newer migrations. Stop the hub first."
    )

    def add_arguments(self, parser):
        parser.add_argument("directory", metavar="DIR", help="the folder holding the backups (hub-backup-…)")
        parser.add_argument("--backup", metavar="NAME", help="the backup to restore (default: the newest)")
        parser.add_argument(
            "--force",
            action="store_true",
            help="replace what this hub holds (refused on a non-empty hub without)",
        )

    def handle(self, *args, directory, backup=None, force=False, **options):
        try:
            done = restore(
                directory,
                name=backup,
                force=force,
                progress=Throttle(self._progress),
                say=self.stdout.write,
            )
        except RestoreRefused as exc:
            raise CommandError(f"Restore refused: {exc}") from None
        except (OSError, RuntimeError, ValueError, DatabaseError) as exc:
            raise CommandError(f"Restore failed part way ({exc}): run it again with --force") from None
        self.stdout.write(
            f"Restored {done.name}: {done.rows} rows, {done.files} files ({human_bytes(done.bytes)}), "
            "every sha256 checked."
        )
        if done.secret_key_matches is False:
            where = (
                f"copy the lines of {done.secrets_file} into .env"
                if done.secrets_file
                else "set HUB_SECRET_KEY to the old hub's key (a backup taken --with-secrets holds it)"
            )
            self.stdout.write(
                "This hub's HUB_SECRET_KEY differs from the backed-up hub's: device API keys and channel secrets "
                f"will not open until you {where}, then start the hub. Or enter them again."
            )
        self.stdout.write(
            "Start the hub (make up): waiting jobs run; a render the device still has is polled again, "
            "not submitted twice."
        )

    def _progress(self, tally: FileTally) -> None:
        self.stdout.write(f"  files {tally.done}/{tally.total} · {human_bytes(tally.done_bytes)}")
