"""Shared fixtures: the cast of people, their clients, and real processes for integration tests."""

from __future__ import annotations

import datetime as dt
import time
from zoneinfo import ZoneInfo

import pytest
import redis as redis_lib
import time_machine
from django.conf import settings

PASSWORD = "correct horse battery staple"

pytest_plugins = [p for p in ("devices.emulator.fixtures",) if __import__("importlib").util.find_spec(p)]
pytest_plugins.append("jobs.tests.ui_fixtures")  # the device and media fixtures, for every app's tests
pytest_plugins.append("hub.tests.leakguard")  # no device key or API token in any answer, frame or log
pytest_plugins.append("hub.tests.s3")  # s3_store: a moto S3 server on loopback and a bucket per test


# --- which tests ran: scripts/test.sh names those a stopped run had started and not finished --------------------
STARTED = __import__("pathlib").Path(__file__).resolve().parent / "var" / "test-logs" / "started.log"


def _controller() -> bool:
    """The process that sees every test (the only one without xdist, xdist's controller with it)."""
    return "PYTEST_XDIST_WORKER" not in __import__("os").environ


def pytest_sessionstart(session):
    if _controller():
        STARTED.parent.mkdir(parents=True, exist_ok=True)
        STARTED.write_text("")


def _note(mark: str, nodeid: str) -> None:
    if _controller():
        with STARTED.open("a") as f:
            f.write(f"{mark} {nodeid}\n")


def pytest_runtest_logstart(nodeid, location):
    _note("+", nodeid)


def pytest_runtest_logfinish(nodeid, location):
    _note("-", nodeid)


def pytest_collection_modifyitems(config, items):
    """Browser tests last: Playwright's session keeps an event loop in the main thread once it starts."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)


@pytest.fixture
def redis_client():
    client = redis_lib.Redis.from_url(settings.REDIS_URL)
    yield client
    client.close()


@pytest.fixture
def midday():
    """Today at noon, household time, the clock still ticking: a test that spends minutes "earlier today" never
    crosses midnight or a Monday, whatever the hour CI runs at."""
    zone = ZoneInfo(settings.TIME_ZONE)
    noon = dt.datetime.combine(dt.datetime.now(zone).date(), dt.time(12), tzinfo=zone)
    with time_machine.travel(noon, tick=True):
        yield noon


def _person(username: str, role: str):
    from hub.accounts.services import user_create_or_update

    return user_create_or_update(username=username, role=role, password=PASSWORD).user


@pytest.fixture
def admin_user(db):
    return _person("ada", "admin")


@pytest.fixture
def member(db):
    return _person("mia", "member")


@pytest.fixture
def other_member(db):
    return _person("otto", "member")


@pytest.fixture
def viewer(db):
    return _person("vic", "viewer")


def _client_for(user):
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def admin_client(admin_user):
    return _client_for(admin_user)


@pytest.fixture
def member_client(member):
    return _client_for(member)


@pytest.fixture
def other_client(other_member):
    return _client_for(other_member)


@pytest.fixture
def viewer_client(viewer):
    return _client_for(viewer)


# --- the test database ---------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's, and before it drops a PostgreSQL test database: the connections of the servers the run
    started (stopped just before) are let end, or ended. Their backends exit a moment after their processes do,
    and the drop failed on them ("is being accessed by other users"), leaving the database behind."""
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    others = "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        deadline = time.monotonic() + 5
        while True:
            cursor.execute(f"SELECT count(*) {others}")
            if not cursor.fetchone()[0]:
                return
            if time.monotonic() > deadline:
                cursor.execute(f"SELECT pg_terminate_backend(pid, 5000) {others}")
                return
            time.sleep(0.1)


# --- real processes ------------------------------------------------------------------------------------
# Session-scoped: one ASGI server, worker and beat serve the whole run. Tests that use them also ask for
# ``transactional_db`` so their rows are committed where those processes can read them. The worker and beat
# share the broker with the engine tests' own (jobs/tests/conftest.py), one set at a time: a test that asks
# for them gets them running, started again if engine tests ran since (hub.testing.take_broker).
_SESSION_CONSUMERS = ("live_worker", "live_beat")


def _stop_session_consumers() -> None:
    from hub.testing import session_procs

    for name in _SESSION_CONSUMERS:
        if (proc := session_procs.get(name)) is not None:
            proc.stop()


def _session_has_the_broker(django_db_blocker) -> None:
    from hub.testing import session_procs, take_broker

    take_broker("session", _stop_session_consumers)
    with django_db_blocker.unblock():
        for name in _SESSION_CONSUMERS:
            if (proc := session_procs.get(name)) is not None and not proc.alive():
                proc.start_and_wait()


def _session_process(name: str, start, django_db_blocker):
    from hub.testing import session_procs

    _session_has_the_broker(django_db_blocker)
    with django_db_blocker.unblock():
        proc = start()
    session_procs[name] = proc
    yield proc
    session_procs.pop(name, None)
    proc.stop()


@pytest.fixture(scope="session")
def _session_worker(django_db_setup, django_db_blocker):
    from hub.testing import start_worker

    yield from _session_process("live_worker", lambda: start_worker("session"), django_db_blocker)


@pytest.fixture(scope="session")
def _session_beat(django_db_setup, django_db_blocker):
    from hub.testing import start_beat

    yield from _session_process("live_beat", start_beat, django_db_blocker)


@pytest.fixture
def live_worker(_session_worker, django_db_blocker):
    """The session's Celery worker, running."""
    _session_has_the_broker(django_db_blocker)
    return _session_worker


@pytest.fixture
def live_beat(_session_beat, django_db_blocker):
    """The session's beat, running."""
    _session_has_the_broker(django_db_blocker)
    return _session_beat


@pytest.fixture(scope="session")
def live_server_asgi(django_db_setup, django_db_blocker):
    from hub.testing import session_procs, start_asgi_server

    with django_db_blocker.unblock():
        proc = start_asgi_server()
    session_procs["live_server_asgi"] = proc
    yield proc
    session_procs.pop("live_server_asgi", None)
    proc.stop()


# --- browser ---------------------------------------------------------------------------------------------
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--autoplay-policy=no-user-gesture-required"]  # fmt: skip
ARTIFACTS = __import__("pathlib").Path(__file__).resolve().parent / "test-artifacts"


@pytest.fixture(scope="session")
def browser():
    import shutil

    if not shutil.which(CHROMIUM):
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's package with `apt-get install -y chromium` "
            "(make test does this when run as root)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.fixture
def signed_in_page(browser, live_server_asgi):
    """A fresh browser context signed in as whoever the test names: ``page = signed_in_page(member)``."""
    from hub.testing import sign_in_page  # reason: hub.testing reads settings, set up after this file is read

    contexts = []

    def open_as(user, *, width: int = 1280, height: int = 900):
        context = browser.new_context(
            viewport={"width": width, "height": height}, base_url=live_server_asgi.extra["url"]
        )
        contexts.append(context)
        page = context.new_page()
        sign_in_page(page, user.username, PASSWORD)
        return page

    yield open_as
    for context in contexts:
        context.close()


def save_screenshot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
