"""How the hub's web server is started: one command for ``make up``, the tests' server and the benchmarks.

Uvicorn with N workers (its own Config, Server and Multiprocess supervisor; only the listening socket is made
here, see :func:`listening_socket`): a parent process binds the port once and runs N worker processes that share
the listening socket; each worker is a full ASGI server (HTTP through Django, websockets through Channels). A
worker that dies is started again by the parent; SIGINT/SIGTERM to the parent stop them all. Nothing a request
or a socket needs lives in one process only: sessions, the cache, rate limits, who-watches-what and the
last-sent digests of live pushes are in Redis or the database, and a push reaches every socket through the
Redis channel layer whichever worker holds it.

Why several: the hub's views are synchronous Python; in one process they share one core (the GIL), so with one
process requests that arrive together queue behind each other however many cores there are. N processes render
N pages at once.
"""

from __future__ import annotations

import copy
import logging
import os
import socket
import sys

from hub.disk import data_folder_problem
from hub.env import SettingError, env_int

ASGI_APP = "hub.asgi:served_application"  # the app behind hub.peer (the proxies' headers)
MIN_DEFAULT_WORKERS = 2
MAX_DEFAULT_WORKERS = 4
KEEP_ALIVE_S = 65  # an idle keep-alive connection's life (see config)


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
    """The web server's argv: ``python -m hub.webserver`` (:func:`serve`)."""
    n = workers() if n_workers is None else n_workers
    return [
        python or sys.executable,
        "-m",
        "hub.webserver",
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        str(n),
    ]


def listening_socket(host: str, port: int) -> socket.socket:
    """The port, bound once in the parent and shared by every worker.

    Made with ``IPPROTO_TCP`` on purpose: asyncio turns Nagle off (TCP_NODELAY) only on connections whose socket
    says so, and uvicorn's own ``--workers`` socket (protocol 0) does not. Without it each response written in
    two pieces (head, then body) waited for the client's delayed ACK: measured, a sign-in page took 48 ms
    instead of 4 on two workers, every time.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.set_inheritable(True)
    return sock


def config(host: str, port: int, n_workers: int):
    """uvicorn's settings for the hub.

    - ``ws="websockets-sansio"``: the websocket protocol on the pinned ``websockets`` package (uvicorn's own
      choice when it is installed; named so a missing package fails at start instead of serving no websockets);
    - ``lifespan="off"``: Channels' router has no lifespan protocol (``auto`` would only log that it failed);
    - ``proxy_headers=False``: the app does it itself (:mod:`hub.peer`): with ``HUB_TRUSTED_PROXIES`` (the reverse
      proxies in front, docs/deploy) ``X-Forwarded-For``/``-Proto`` are believed from those addresses alone, so the
      client address is the person's and sign-in throttling counts each one apart, and the connection's own
      address is kept beside it for the trusted sign-in header (hub.accounts.trusted_header). Without it the
      address is the peer's, never the header (anyone can write it; uvicorn would otherwise trust it from
      127.0.0.1);
    - ``timeout_graceful_shutdown=4``: Ctrl-C waits that long for requests in flight, within the 5 s honcho
      allows before it kills; ``server_header=False``: nothing says which server answers;
    - ``log_config``: uvicorn's own, every handler masking tokens (:func:`log_config`);
    - ``timeout_keep_alive=KEEP_ALIVE_S``: an idle connection stays open that long (uvicorn's default is 5 s). A
      person reads a page for longer than 5 s, and a request sent just as the server closed its connection met
      a reset ("Connection reset by peer"): browsers quietly send it again, scripts and HTTP libraries (httpx,
      requests) fail. Measured: 1 of ~500 requests of 20 clients reading pages for 1-5 s. Longer than the 60 s
      idle timeout of common proxies, so a proxy in front closes first.
    """
    import uvicorn

    return uvicorn.Config(
        ASGI_APP,
        host=host,
        port=port,
        workers=n_workers,
        ws="websockets-sansio",
        lifespan="off",
        proxy_headers=False,
        timeout_graceful_shutdown=4,
        timeout_keep_alive=KEEP_ALIVE_S,
        server_header=False,
        log_config=log_config(),
    )


def log_config() -> dict:
    """uvicorn's own logging settings, with the token mask (hub.logfilters.MaskTokens) on each of its handlers: its
    access log writes every request's path and query, where share links, invitations and password resets are."""
    from uvicorn.config import LOGGING_CONFIG

    settings = copy.deepcopy(LOGGING_CONFIG)
    settings.setdefault("filters", {})["mask_tokens"] = {"()": "hub.logfilters.MaskTokens"}
    for handler in settings["handlers"].values():
        handler.setdefault("filters", []).append("mask_tokens")
    return settings


def serve(host: str, port: int, n_workers: int) -> None:
    """Run the hub's ASGI app under uvicorn's own server (one worker) or multiprocess supervisor (several)."""
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    # Marks the workers with this server's pid (they inherit it): each keeps a small pool of PostgreSQL
    # connections (hub.settings: HUB_DB_POOL of them, 0 for none), which the Celery worker and beat never do.
    os.environ["HUB_WEB_SERVER_PROCESS"] = str(os.getpid())
    settings = config(host, port, n_workers)
    log = logging.getLogger("uvicorn.error")
    try:
        sock = listening_socket(host, port)
    except OSError as exc:
        log.error("%s", exc)
        sys.exit(STARTUP_FAILURE)
    log.info(
        "Uvicorn running on http://%s:%d with %d worker(s) (Press CTRL+C to quit)", host, port, n_workers
    )
    if n_workers > 1:
        Multiprocess(settings, sockets=[sock]).run()
        return
    server = uvicorn.Server(settings)
    server.run(sockets=[sock])
    if not server.started:
        sys.exit(STARTUP_FAILURE)


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m hub.webserver", description="Serve the hub (make up runs this)."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=None, help="default: HUB_WEB_WORKERS")
    args = parser.parse_args(argv)
    refuse_to_start_badly()
    serve(args.host, args.port, args.workers or workers())


def refuse_to_start_badly() -> None:
    """Stop with one line, before any worker process starts, on a setting that can't be and on a data folder the
    hub can't write (the workers would otherwise fail one after another, each with a traceback)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
    try:
        problem = data_folder_problem()
    except SettingError as exc:
        sys.exit(f"tiiny-hub: configuration error: {exc}")
    if problem:
        sys.exit(f"tiiny-hub: {problem}")


if __name__ == "__main__":
    main()
