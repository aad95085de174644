"""``python -m devices.emulator <kind> ...``: run a device emulator.

Kinds: ``tiiny`` (this package's Tiiny Pocket emulator) and, when its module exists, ``tensorsharp``
(registered by ``devices.emulator.tensorsharp_cli.add_cli(subparsers)``).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from devices.emulator.runner import add_tiiny_arguments, run_tiiny_cli


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m devices.emulator", description=__doc__)
    subparsers = parser.add_subparsers(dest="kind", required=True)
    tiiny = subparsers.add_parser("tiiny", help="Tiiny Pocket (TiinyOS 0.1.38) emulator")
    add_tiiny_arguments(tiiny)
    tiiny.set_defaults(func=run_tiiny_cli)
    # Other emulators plug in here; each module's add_cli(subparsers) adds a subparser with set_defaults(func=...).
    for module_name in ("devices.emulator.tensorsharp_cli", "devices.emulator.tensorsharp"):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise  # the module exists but is broken: say so
            continue
        if hasattr(module, "add_cli"):
            module.add_cli(subparsers)
            break
    return parser


def main(argv: list[str] | None = None) -> None:
    ns = build_parser().parse_args(argv)
    ns.func(ns)


if __name__ == "__main__":
    main(sys.argv[1:])
