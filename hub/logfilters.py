"""Logging filters the hub's LOGGING names (hub.settings)."""

from __future__ import annotations

import logging


class DropDueTaskLines(logging.Filter):
    """Beat's line for every periodic task it sends ("Scheduler: Sending due task …"): the sweeps run every few
    seconds, which would be megabytes a day of the same line in beat.log. Its other lines (start, errors) stay:
    "beat: Starting..." is how a supervisor knows beat is up."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Scheduler: Sending due task")
