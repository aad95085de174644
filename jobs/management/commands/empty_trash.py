"""Remove what is in the trash for good (files, thumbnails, previews; on the local disk or S3)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from jobs.queue.trash import trash_empty
from jobs.quotas.services import MB


class Command(BaseCommand):
    help = (
        "Remove the results in the trash for good: all of them, or (--older-than DAYS) those deleted at least "
        "DAYS days ago. The daily task does it with HUB_TRASH_DAYS."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--older-than", type=int, metavar="DAYS", help="only what went in at least DAYS days ago"
        )

    def handle(self, *args, **opts) -> None:
        days = opts["older_than"]
        if days is not None and days < 0:
            raise CommandError("--older-than takes a whole number of days, 0 or more.")
        done = trash_empty(older_than_days=days)
        self.stdout.write(
            f"removed {done.jobs} job(s) from the trash for good, {done.bytes / MB:.1f} MB freed"
        )
