"""Logging filters the hub's LOGGING names (hub.settings), and the token mask every handler carries."""

from __future__ import annotations

import logging
import re
from typing import Any


class DropDueTaskLines(logging.Filter):
    """Beat's line for every periodic task it sends ("Scheduler: Sending due task …"): the sweeps run every few
    seconds, which would be megabytes a day of the same line in beat.log. Its other lines (start, errors) stay:
    "beat: Starting..." is how a supervisor knows beat is up."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Scheduler: Sending due task")


#: What a token looks like in a log line, and what is kept of it. Each keeps the route's own words, so a masked
#: line still tells which page was asked for ("/jobs/shared/***/files/3/"); a separator may be percent-encoded
#: (a ``?next=`` that carries a path).
_S = r"(?:/|%2F)"
_TOKEN_PATTERNS = [
    # a share link, an invitation (hub.accounts.invitations), a password reset's uid and token (Django's view)
    (re.compile(rf"({_S}shared{_S})[^/%\s?#\"']+", re.I), r"\1***"),
    (re.compile(rf"({_S}invite{_S})[^/%\s?#\"']+", re.I), r"\1***"),
    (re.compile(rf"({_S}reset{_S})[^/%\s?#\"']+{_S}[^/%\s?#\"']+(?={_S})", re.I), r"\1***/***"),
    # a token in a query string (?token=, &access_token=, ?key=), a Bearer header, the hub's API token anywhere
    (re.compile(r"([?&](?:token|access_token|key|api_key)=)[^&\s#\"']+", re.I), r"\1***"),
    (re.compile(r"(\bBearer\s+)[^\s\"',;]+", re.I), r"\1***"),
    (re.compile(r"\bthub_[A-Za-z0-9_-]{4,}"), "thub_***"),
]


def mask_tokens(text: str) -> str:
    """``text`` with every share, invitation, password-reset and API token in it replaced by ``***``."""
    for pattern, kept in _TOKEN_PATTERNS:
        text = pattern.sub(kept, text)
    return text


def _masked(value: Any) -> Any:
    return mask_tokens(value) if isinstance(value, str) else value


class MaskTokens(logging.Filter):
    """Masks tokens in a record's message and its arguments, before any handler formats it.

    Installed on every handler the hub's processes log through: Django's (hub.settings LOGGING), uvicorn's access
    and error logs (hub.webserver), Celery's (hub.celery). The access log is where they were: a share link, an
    unused invitation and a password reset are a path, and whoever reads the log could open them. The arguments
    are masked one by one rather than the message formatted here: uvicorn's access formatter takes its arguments
    apart again (client, method, path, version, status).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        masked = _masked(record.msg)
        if masked != record.msg and record.args:
            # A token in the format itself ("?token=%s"): its placeholder may be what was masked, so the arguments
            # would no longer fit. Formatted here, then masked whole.
            record.msg, record.args = mask_tokens(record.getMessage()), None
            return True
        record.msg = masked
        if isinstance(record.args, tuple):
            record.args = tuple(_masked(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: _masked(v) for k, v in record.args.items()}
        return True


def mask_every_handler(logger: logging.Logger) -> None:
    """Put :class:`MaskTokens` on each of ``logger``'s handlers that has none (Celery makes its own handlers)."""
    for handler in logger.handlers:
        if not any(isinstance(f, MaskTokens) for f in handler.filters):
            handler.addFilter(MaskTokens())
