"""``manage.py emulate_tiiny``: run the Tiiny Pocket emulator (same flags as ``python -m devices.emulator tiiny``)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from devices.emulator.runner import add_tiiny_arguments, run_tiiny_cli


class Command(BaseCommand):
    help = "Run the Tiiny Pocket emulator (a time-scaled fake TiinyOS 0.1.38 device)."

    def add_arguments(self, parser) -> None:
        add_tiiny_arguments(parser)

    def handle(self, *args, **options) -> None:
        import argparse

        run_tiiny_cli(argparse.Namespace(**options))
