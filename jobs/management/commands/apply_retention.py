"""Run the retention rules now (the daily task's work), or with --dry-run say what they would do."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from jobs.queue.retention import retention_apply


class Command(BaseCommand):
    help = (
        "Apply the retention rules: move the results announced a week ago to the trash and announce what the "
        "rules take a week from now. --dry-run changes nothing and lists what it would do."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="change nothing; list what would happen")

    def handle(self, *args, **opts) -> None:
        dry = opts["dry_run"]
        out = retention_apply(dry_run=dry)
        names = dict(get_user_model().objects.values_list("pk", "username"))
        verb_trash, verb_announce = ("would move", "would announce") if dry else ("moved", "announced")
        for owner, ids in sorted(out.trashed.items()):
            if ids:
                listed = ", ".join(f"#{pk}" for pk in ids)
                self.stdout.write(
                    f"{names.get(owner, owner)}: {verb_trash} {len(ids)} result(s) to the trash: {listed}"
                )
        when = f"{out.due_at:%Y-%m-%d}" if out.due_at else "?"
        for owner, ids in sorted(out.announced.items()):
            if ids:
                listed = ", ".join(f"#{pk}" for pk in ids)
                self.stdout.write(
                    f"{names.get(owner, owner)}: {verb_announce} {len(ids)} result(s) for the trash on {when}: {listed}"
                )
        announced, trashed = out.counts
        prefix = "dry run, nothing changed: " if dry else ""
        self.stdout.write(f"{prefix}{trashed} result(s) to the trash, {announced} announced")
