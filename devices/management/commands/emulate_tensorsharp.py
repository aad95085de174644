"""`manage.py emulate_tensorsharp`: run the TensorSharp.Server.Host emulator (see devices.emulator)."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand

from devices.emulator import tensorsharp_cli


class Command(BaseCommand):
    help = "Run the TensorSharp.Server.Host emulator (video / image-edit) over HTTP."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        # Reuse the CLI's own option definitions so the two front doors never drift apart.
        sub = argparse.ArgumentParser(add_help=False).add_subparsers()
        tensorsharp_cli.add_cli(sub)
        for action in sub.choices["tensorsharp"]._actions:
            if action.option_strings and action.dest != "help":
                parser._add_action(action)

    def handle(self, *args: Any, **options: Any) -> None:
        namespace = argparse.Namespace(
            **{k: options[k] for k in ("host", "port", "speed", "model", "data_dir")}
        )
        self.stdout.write(
            f"TensorSharp emulator ({namespace.model}) on http://{namespace.host}:{namespace.port}/"
        )
        tensorsharp_cli.run(namespace)
