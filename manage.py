#!/usr/bin/env python
"""Django's command-line utility for Tiiny Hub."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
    from django.core.management import execute_from_command_line

    from hub.env import SettingError

    # Django answers `manage.py version` itself (its own version) before any command is looked up: the hub's own
    # version command (backups/management/commands/hub_version.py) answers it instead.
    argv = [*sys.argv[:1], "hub_version", *sys.argv[2:]] if sys.argv[1:2] == ["version"] else sys.argv
    try:
        execute_from_command_line(argv)
    except SettingError as exc:
        sys.exit(f"tiiny-hub: configuration error: {exc}")


if __name__ == "__main__":
    main()
