"""Copy every stored file to another store (an S3 bucket), checked by sha256; resumable. See jobs.files.move."""

from __future__ import annotations

import os

from django.core.files.storage import default_storage, storages
from django.core.management.base import BaseCommand, CommandError

from hub import media_storage
from hub.env import SettingError
from jobs.files.move import move


class Command(BaseCommand):
    help = (
        "Copy every result, input, thumbnail and preview to the store --to names (s3://bucket/prefix?endpoint=...), "
        "each checked by sha256; run it again to resume or to copy what came since. Keys: AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (or their _FILE variables)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--to", required=True, help="the new store: s3://bucket/prefix?endpoint=...&region=..."
        )
        parser.add_argument(
            "--delete-source",
            action="store_true",
            help="once every file is copied and verified, remove it from the current store",
        )

    def handle(self, *args, **opts) -> None:
        try:
            new = media_storage.parse(opts["to"], name="--to")
            setting = media_storage.storage_setting(new, os.environ)
        except SettingError as exc:
            raise CommandError(str(exc)) from None
        if not new.remote:
            raise CommandError("--to must name a bucket (s3://...): the local folder is where files are now")
        target = storages.create_storage(setting)
        verbose = opts["verbosity"] >= 2
        report = move(
            default_storage,
            target,
            delete_source=opts["delete_source"],
            said=lambda name, what: (
                (verbose or what.startswith("failed")) and self.stdout.write(f"{name}: {what}")
            ),
        )
        mb = report.bytes_copied / (1024 * 1024)
        self.stdout.write(
            f"{len(report.copied)} file(s) copied ({mb:.1f} MB), {len(report.already)} already there and checked, "
            f"{len(report.failed)} failed"
            + (f", {len(report.deleted)} removed from the old store" if report.deleted else "")
        )
        if not report.ok:
            raise CommandError(
                f"{len(report.failed)} file(s) could not be copied (above); run the same command again to go on "
                "where it stopped: what is already there is checked, not copied again"
            )
        self.stdout.write(
            "Every file is in the new store. This command cannot change the running hub's environment: set this "
            "line in its environment (.env, or the service's unit) and start the web server, worker and beat "
            "again. Files saved meanwhile are copied by running this command once more just before the switch. "
            + ("" if opts["delete_source"] else "The old files stay until you run it with --delete-source.")
        )
        self.stdout.write(f"HUB_MEDIA_STORAGE={new.url()}")
