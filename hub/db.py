"""The database connection of a request that waits for long."""

from __future__ import annotations

from django.db import connection


def give_back() -> None:
    """Hand this thread's database connection back now rather than at the end of the request: to the web
    server's pool on PostgreSQL (``HUB_DB_POOL``), else it is closed. For a request that waits between its
    reads (a ``/v1`` call waiting minutes for its render, inside an async view whose sync calls share one
    connection until the request ends): with it held, a few such calls took every pooled connection and the
    other pages waited for one. Anything read later opens one again. (A streamed download needs none of this:
    Django gives a sync view's connection back before the body is sent.) Never inside a transaction (a test's,
    or the caller's own): there a close would doom it."""
    if not connection.in_atomic_block:
        connection.close()
