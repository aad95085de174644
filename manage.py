#!/usr/bin/env python
"""Django's command-line utility for Tiiny Hub."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
    from django.core.management import execute_from_command_line

    from hub.env import SettingError

    try:
        execute_from_command_line(sys.argv)
    except SettingError as exc:
        sys.exit(f"tiiny-hub: configuration error: {exc}")


if __name__ == "__main__":
    main()
