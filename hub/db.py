"""The database connection of a request that waits or streams for long."""

from __future__ import annotations

from django.db import connection


def give_back() -> None:
    """Hand this thread's database connection back now rather than at the end of the request: to the web
    server's pool on PostgreSQL (``HUB_DB_POOL``), else it is closed. For the requests that outlast their reads
    (a video streamed to a phone for minutes, a ``/v1`` call waiting for its render): with the connection held,
    a few of them took every pooled connection and the other pages waited for one. Anything read later opens
    one again. Never inside a transaction (a test's, or the caller's own): there a close would doom it."""
    if not connection.in_atomic_block:
        connection.close()
