"""How the hub's web server is started: one command for ``make up``, the tests' server and the benchmarks.

Uvicorn with ``--workers N``: a parent process binds the port once and runs N worker processes that share the
listening socket; each worker is a full ASGI server (HTTP through Django, websockets through Channels). A
worker that dies is started again by the parent; SIGINT/SIGTERM to the parent stop them all. Nothing a request
or a socket needs lives in one process only: sessions, the cache, rate limits, who-watches-what and the
last-sent digests of live pushes are in Redis or the database, and a push reaches every socket through the
Redis channel layer whichever worker holds it.

Why several: Django runs the hub's views synchronously, one at a time per process (asgiref's thread-sensitive
executor), so with one process requests that arrive together queue behind each other however many cores there
are. N processes serve N pages at once.
"""

from __future__ import annotations

import os
import sys

from hub.env import env_int

ASGI_APP = "hub.asgi:application"
MIN_DEFAULT_WORKERS = 2
MAX_DEFAULT_WORKERS = 4


def cpu_count() -> int:
    """The CPUs this process may run on (a container's or taskset's limit, not the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_workers() -> int:
    """One per CPU, at least 2 and at most 4.

    At least 2: even on one core a second process answers a quick page while the first renders a slow one, and
    while uvicorn brings a crashed worker back the other still serves. At most 4: each worker holds its own
    Django (~90 MB PSS, ~115 MB resident), database and Redis connections, and the Celery worker, beat, the
    database and Redis share the same small machine; past 4 a household hub gains nothing but memory.
    """
    return min(MAX_DEFAULT_WORKERS, max(MIN_DEFAULT_WORKERS, cpu_count()))


def workers() -> int:
    """``HUB_WEB_WORKERS``: how many web processes serve the hub."""
    return env_int("HUB_WEB_WORKERS", default_workers(), minimum=1, maximum=64)


def command(host: str, port: int, *, n_workers: int | None = None, python: str | None = None) -> list[str]:
    """The web server's argv.

    - ``--ws websockets-sansio``: the websocket protocol on the pinned ``websockets`` package (uvicorn's own
      choice when it is installed; named so a missing package fails at start instead of silently serving
      no websockets);
    - ``--lifespan off``: Channels' router has no lifespan protocol (``auto`` would only log that it failed);
    - ``--no-proxy-headers``: the client address is the peer's, never ``X-Forwarded-For`` (sign-in throttling
      and ``/metrics`` read REMOTE_ADDR; uvicorn would otherwise trust that header from 127.0.0.1);
    - ``--timeout-graceful-shutdown 4``: Ctrl-C waits that long for requests in flight, within the 5 s
      honcho allows before it kills;
    - ``--no-server-header``: nothing says which server or version answers.
    """
    return [
        python or sys.executable,
        "-m",
        "uvicorn",
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        str(workers() if n_workers is None else n_workers),
        "--ws",
        "websockets-sansio",
        "--lifespan",
        "off",
        "--no-proxy-headers",
        "--timeout-graceful-shutdown",
        "4",
        "--no-server-header",
        ASGI_APP,
    ]
