"""``manage.py version`` (manage.py sends it here; ``hub_version`` also works): the hub's version and the git commit it runs (see CHANGELOG.md)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from hub.version import version_line


class Command(BaseCommand):
    help = "Print the hub's version and git commit."

    def handle(self, *args, **options):
        self.stdout.write(f"Tiiny Hub {version_line()}")
