"""Real processes for integration tests: an ASGI server, a Celery worker and beat.

They run as separate OS processes against the test database (a file for SQLite, ``test_<name>`` on
PostgreSQL) and the run's private Redis, exactly as in production. Tests that use them need
``transactional_db`` so their writes are committed where the other processes can see them.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings
from django.db import connection

from hub import webserver
from hub.celery import app
from hub.redis_server import free_port

BASE_DIR = Path(settings.BASE_DIR)

#: The session-wide processes the root conftest started ("live_worker", "live_beat", "live_server_asgi").
session_procs: dict[str, Proc] = {}

#: Who consumes the broker now, and how to stop them: the session's worker and beat (the hub as ``make up`` runs
#: it) or the engine tests' own (jobs/tests/conftest.py: short intervals; they kill and start workers and count
#: on being the only consumers). One at a time, handed over per test, whatever order the tests run in.
_broker_owner: list[tuple[str, Callable[[], None]]] = []


def take_broker(owner: str, release: Callable[[], None]) -> None:
    """Make ``owner`` the broker's consumer: the previous owner's processes are stopped (its ``release``)."""
    if _broker_owner and _broker_owner[0][0] != owner:
        _broker_owner.pop()[1]()
    _broker_owner[:] = [(owner, release)]


def test_database_url() -> str:
    """The URL of the database pytest-django created, for the processes the tests start."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{Path(db['NAME']).resolve()}"
    user = db.get("USER") or ""
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # the servers must keep Django's async safety checks
    env.update(
        {
            "DATABASE_URL": test_database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "HUB_SECRET_KEY": settings.SECRET_KEY,
            "HUB_DATA_DIR": str(settings.DATA_DIR),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


@dataclass
class Proc:
    name: str
    args: list[str]
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen | None = None
    extra: dict = field(default_factory=dict)
    ready: str = ""  # the log line that says it is up (see ``start_and_wait``)
    # Where this Proc's own log begins: the file is shared with earlier processes of the same name (another test's
    # ``worker-home``), whose lines are not this one's. Restarts of this Proc append and count as its log.
    log_from: int | None = None

    def start(self) -> Proc:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        if self.log_from is None:
            self.log_from = log.tell()
        self.process = subprocess.Popen(
            self.args,
            cwd=BASE_DIR,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
        """Stop the whole process group (a prefork worker has children)."""
        if not self.alive():
            return
        try:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=5)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """Simulate a crash: SIGKILL, no cleanup."""
        self.stop(signal.SIGKILL)

    def start_and_wait(self, *, timeout: float = 30.0) -> Proc:
        """Start it and wait until its log says ``ready`` once more than before: the log is appended to across
        restarts, so the line an earlier run wrote must not count. A new Proc's log begins where the file ends when
        it starts (``log_from``), so nothing before that counts either (an earlier Proc of the same name)."""
        before = self.log_text().count(self.ready) if self.log_from is not None else 0
        self.start()
        try:
            wait_for(
                lambda: self.log_text().count(self.ready) > before, timeout=timeout, what=self.name, proc=self
            )
        except BaseException:
            self.stop()  # a process that never got ready is nobody's to stop later: it would outlive the run
            raise
        return self

    def log_text(self) -> str:
        """What this Proc's runs wrote (not the earlier processes' of the same name before it); nothing before its
        first start."""
        if self.log_from is None:
            return ""
        try:
            with self.log_path.open("rb") as log:
                log.seek(self.log_from)
                return log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


def post_sign_in(client: httpx.Client, username: str, password: str) -> httpx.Response:
    """The sign-in form as a browser sends it to the hub at ``client``'s base URL: the form's CSRF token, then a
    POST with Origin and Referer. The answer: 302 signed in, 400 refused, 429 locked out."""
    page = client.get("/accounts/login/")
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert found, f"no sign-in form ({page.status_code}): {page.text[:500]}"
    base = str(client.base_url).rstrip("/")
    return client.post(
        "/accounts/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": found.group(1)},
        headers={"Origin": base, "Referer": f"{base}/accounts/login/"},
    )


def sign_in(base_url: str, username: str, password: str, **client: object) -> httpx.Client:
    """A client of the hub at ``base_url`` signed in as ``username`` (``client``: httpx.Client's options)."""
    session = httpx.Client(base_url=base_url, **{"timeout": 30, **client})
    response = post_sign_in(session, username, password)
    assert response.status_code == 302, response.text[:800]
    return session


def sign_in_page(page: Any, username: str, password: str) -> None:
    """Sign a Playwright ``page`` in through the login form (its context's base URL), as a person would."""
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url("**/")


def wait_for(predicate: Callable[[], bool], *, timeout: float, what: str, proc: Proc | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and not proc.alive():
            raise RuntimeError(f"{proc.name} exited while waiting for {what}:\n{proc.log_tail()}")
        time.sleep(0.05)
    tail = f"\n{proc.log_tail()}" if proc else ""
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}{tail}")


def log_dir() -> Path:
    return Path(settings.DATA_DIR) / "test-logs"


def start_asgi_server(*, workers: int | None = None, **env: str) -> Proc:
    """The hub's web server as ``make up`` runs it (:func:`hub.webserver.command`; ``HUB_WEB_WORKERS`` processes
    unless ``workers`` says otherwise), on a free port of loopback. :meth:`Proc.stop`/:meth:`Proc.kill` take
    the whole process group: the parent and every worker."""
    port = free_port()
    env.setdefault("HUB_PORT", str(port))  # as make up's processes know theirs (links are built on it)
    proc = Proc(
        "web",
        webserver.command("127.0.0.1", port, n_workers=workers),
        child_env(**env),
        log_dir() / f"web-{port}.log",
    ).start()
    proc.extra["url"] = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{proc.extra['url']}/accounts/login/", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(up, timeout=30, what="the ASGI server", proc=proc)
    return proc


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants, from /proc (Linux): e.g. the web server's parent and its workers."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(parents.get(pid, []))
    return out


def connection_holder(pids: list[int], server_port: int, client_port: int) -> int | None:
    """Which of ``pids`` holds the server end of the loopback TCP connection from ``client_port`` (/proc/net/tcp:
    the socket's inode, then the process with a descriptor on it). None when no such connection is open."""
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if int(local.split(":")[1], 16) == server_port and int(remote.split(":")[1], 16) == client_port:
            inode = fields[9]
            break
    if inode is None:
        return None
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    return None


def start_worker(name: str = "w1", *, concurrency: int = 2, **env: str) -> Proc:
    proc = Proc(
        f"worker-{name}",
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "hub",
            "worker",
            "--loglevel=INFO",
            f"--hostname={name}@%h",
            f"--concurrency={concurrency}",
            "--pool=prefork",
            "--without-gossip",
            "--without-mingle",
        ],
        child_env(**env),
        log_dir() / f"worker-{name}.log",
        ready="ready.",
    )
    return proc.start_and_wait()


def start_beat(**env: str) -> Proc:
    schedule = log_dir() / f"celerybeat-{free_port()}"
    proc = Proc(
        "beat",
        [sys.executable, "-m", "celery", "-A", "hub", "beat", "--loglevel=INFO", f"--schedule={schedule}"],
        child_env(**env),
        log_dir() / "beat.log",
        ready="beat: Starting",
    )
    return proc.start_and_wait()


def run_async(coroutine_function, *args):
    """Run ``coroutine_function(*args)`` to completion on a fresh event loop in its own thread.

    Playwright's sync API keeps an event loop running in the test thread for the whole session, so a plain
    ``asyncio.run`` there would fail; a worker thread has no loop of its own.

    A daemon thread, waited on with an interruptible join and never joined again: when the test's timeout ends
    the wait, a loop stuck in ``asyncio.run``'s cleanup (a task that won't finish cancelling) is left behind,
    and the run goes on. A thread pool's ``with`` joined it again after the timeout, with nothing left to end
    that wait: CI's PostgreSQL pass hung in ``test_the_websocket_matrix`` that way.
    """
    import asyncio
    import threading

    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = asyncio.run(coroutine_function(*args))
        except BaseException as exc:  # noqa: BLE001 - raised again in the test's thread
            box["error"] = exc

    thread = threading.Thread(target=run, name="run-async", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def fresh_broker_pools(url: str | None = None) -> None:
    """Drop this process's cached broker connections and producers (optionally pointing Celery at ``url``), so
    the next publish connects afresh: ``force_close_all`` alone leaves a closed pool behind, and Celery keeps
    its producer pool bound to it ("Acquire on closed pool" in later tests)."""
    import kombu.pools

    kombu.pools.reset()
    app._pool = None
    app.amqp._producer_pool = None
    if url is not None:
        app.conf.broker_url = url


@contextlib.contextmanager
def broker_unreachable():
    """Inside: every Celery publish of this process goes to a port nobody listens on (Redis down, as a user's
    broker can be); the pools are fresh on the way in and out."""
    original = app.conf.broker_url
    fresh_broker_pools(f"redis://127.0.0.1:{free_port()}/0")
    try:
        yield
    finally:
        fresh_broker_pools(original)


@contextlib.contextmanager
def tmpfs(folder: Path, options: str):
    """A tmpfs mounted on ``folder`` for the test (``options``: e.g. ``size=1m``, ``ro,size=1m``): a real small or
    read-only file system, whose ENOSPC or EROFS every process sees. Skips the test where mounting is not allowed
    (the suite runs as root in its sandbox); unmounted afterwards, so the folder's own files come back."""
    import pytest  # reason: only tests call this; the module is imported by the suite's plugins too

    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, text=True
    )
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs ({options}) here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def load_script(name: str):
    """A script of ``scripts/`` (make up's launcher, the service writer) loaded as a module, to test its parts."""
    import importlib.util  # reason: only tests load scripts

    path = Path(__file__).resolve().parent.parent / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"hub_script_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass with postponed annotations looks its module up by name
    spec.loader.exec_module(module)
    return module


def sqlite_query_plan(run: Callable[[], object]) -> tuple[object, str]:
    """What ``run()`` returns, and SQLite's EXPLAIN QUERY PLAN of the one query it makes, with statistics
    (``ANALYZE``: they make SQLite weigh every index, as on a real hub's data); the statistics go again after."""
    from django.test.utils import CaptureQueriesContext

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    try:
        with CaptureQueriesContext(connection) as captured:
            result = run()
        (query,) = captured.captured_queries
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN QUERY PLAN " + query["sql"])
            return result, " ".join(str(row) for row in cursor.fetchall())
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS sqlite_stat1")
