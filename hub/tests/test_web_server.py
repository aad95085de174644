"""The web server is several processes (hub.webserver): they serve side by side, a push reaches sockets held by
any of them, a crashed one comes back, and HUB_WEB_WORKERS says how many."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import httpx
import pytest
import websockets

from conftest import PASSWORD
from hub import webserver
from hub.env import SettingError
from hub.testing import connection_holder, process_tree, run_async, sign_in, start_asgi_server, wait_for
from jobs.tests.ui_fixtures import device  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_workers(transactional_db):
    proc = start_asgi_server(workers=2)
    yield proc
    proc.stop()


BASE = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _workers(proc) -> list[int]:
    """The web server's worker processes (multiprocessing children; not its resource tracker)."""
    found = []
    for pid in process_tree(proc.process.pid):
        try:
            if b"spawn_main" in open(f"/proc/{pid}/cmdline", "rb").read():
                found.append(pid)
        except OSError:
            continue
    return found


def test_the_default_is_one_per_cpu_between_2_and_4(monkeypatch):
    monkeypatch.delenv("HUB_WEB_WORKERS", raising=False)
    for cpus, expected in ((1, 2), (2, 2), (3, 3), (4, 4), (16, 4)):
        monkeypatch.setattr(webserver, "cpu_count", lambda cpus=cpus: cpus)
        assert webserver.workers() == expected
    monkeypatch.setenv("HUB_WEB_WORKERS", "6")
    assert webserver.workers() == 6
    assert (
        "--workers" in (argv := webserver.command("0.0.0.0", 8000))
        and argv[argv.index("--workers") + 1] == "6"
    )
    for bad in ("0", "two"):
        monkeypatch.setenv("HUB_WEB_WORKERS", bad)
        with pytest.raises(SettingError, match="HUB_WEB_WORKERS"):
            webserver.workers()


def test_the_client_address_is_the_peer_never_a_forwarded_header():
    # Sign-in throttling and /metrics read REMOTE_ADDR: uvicorn trusts X-Forwarded-For from 127.0.0.1 unless told.
    assert webserver.config("127.0.0.1", 8000, 2).proxy_headers is False


async def test_forwarded_headers_are_believed_from_the_trusted_proxies_alone():
    """hub.peer does uvicorn's proxy headers itself, keeping the connection's own address beside the person's."""
    from hub.peer import DirectPeer

    seen = []

    async def app(scope, receive, send):
        seen.append((scope["client"][0], scope["hub.peer"]))

    served = DirectPeer(app, ["127.0.0.1", "10.0.0.0/24"])
    headers = [(b"x-forwarded-for", b"192.168.1.7")]
    for peer in ("127.0.0.1", "10.0.0.9", "192.168.1.50"):
        await served({"type": "http", "client": (peer, 5000), "headers": headers}, None, None)
    await DirectPeer(app, [])({"type": "http", "client": ("127.0.0.1", 1), "headers": headers}, None, None)
    assert seen == [
        ("192.168.1.7", "127.0.0.1"),
        ("192.168.1.7", "10.0.0.9"),
        ("192.168.1.50", "192.168.1.50"),
        ("127.0.0.1", "127.0.0.1"),
    ]


def test_connections_to_the_shared_socket_get_nagle_turned_off():
    """asyncio sets TCP_NODELAY only on connections whose listening socket says IPPROTO_TCP; uvicorn's own
    --workers socket does not, and every two-piece response then waited ~40 ms for the client's delayed ACK."""
    import socket

    from hub.redis_server import free_port

    async def nodelay_of_an_accepted_connection(sock: socket.socket) -> int:
        loop = asyncio.get_running_loop()
        accepted: asyncio.Future = loop.create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport):
                raw = transport.get_extra_info("socket")
                accepted.set_result(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

        server = await loop.create_server(Probe, sock=sock)
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        try:
            return await asyncio.wait_for(accepted, 5)
        finally:
            writer.close()
            server.close()

    ours = webserver.listening_socket("127.0.0.1", free_port())
    assert asyncio.run(nodelay_of_an_accepted_connection(ours)) != 0
    plain = socket.socket(socket.AF_INET)  # what uvicorn --workers binds
    plain.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    plain.bind(("127.0.0.1", free_port()))
    assert asyncio.run(nodelay_of_an_accepted_connection(plain)) == 0


@pytest.mark.integration
def test_an_idle_keep_alive_connection_outlasts_a_person_reading_a_page(two_workers):
    """uvicorn closes an idle connection after 5 s by default: a request sent as it closed met a reset, which
    scripts and HTTP libraries report as an error (1 in ~500 requests of 20 people reading pages for 1-5 s).
    The same connection still answers after 6 s idle."""
    import socket
    import time
    from urllib.parse import urlsplit

    url = urlsplit(two_workers.extra["url"])
    request = f"GET /favicon.ico HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n".encode()

    def answer(sock: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < length(data):
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
        return data

    def length(data: bytes) -> int:
        head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
        return (
            int(head.split("content-length:", 1)[1].split("\r\n", 1)[0]) if "content-length:" in head else 0
        )

    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        sock.sendall(request)
        assert answer(sock).startswith(b"HTTP/1.1 200")
        time.sleep(6)
        sock.sendall(request)
        assert answer(sock).startswith(b"HTTP/1.1 200")


@pytest.mark.integration
def test_a_push_reaches_sockets_held_by_different_web_processes(two_workers, admin_user):
    from hub.live import push, wire_group

    base = two_workers.extra["url"]
    port = int(base.rsplit(":", 1)[1])
    client = sign_in(base, "ada", PASSWORD)
    cookie = f"sessionid={client.cookies['sessionid']}"
    workers = _workers(two_workers)
    assert len(workers) == 2

    async def scenario() -> tuple[set[int], list[str]]:
        sockets, holders = [], {}
        try:
            # The kernel hands each new connection to whichever worker accepts first: open sockets until both
            # workers hold one (a single process would never get there).
            for _ in range(24):
                ws = await websockets.connect(
                    base.replace("http", "ws") + f"/ws/hub/?watch=wire:{admin_user.pk}",
                    origin=base,
                    additional_headers={"Cookie": cookie},
                )
                sockets.append(ws)
                holders[ws] = connection_holder(workers, port, ws.local_address[1])
                if len(set(holders.values()) - {None}) == 2:
                    break
            await asyncio.sleep(0.3)  # every socket has joined its group
            html = '<div id="live-wire" hx-swap-oob="true">from the test</div>'
            await asyncio.to_thread(push, wire_group(admin_user.pk), html)
            got = await asyncio.gather(*(asyncio.wait_for(ws.recv(), 10) for ws in sockets))
            return set(holders.values()), got
        finally:
            for ws in sockets:
                await ws.close()

    holders, got = run_async(scenario)
    assert holders == set(workers)
    assert all("from the test" in message for message in got)


@pytest.mark.integration
def test_a_killed_web_process_comes_back_and_the_other_keeps_serving(two_workers):
    base = two_workers.extra["url"]
    first, second = _workers(two_workers)
    os.kill(first, signal.SIGKILL)
    for _ in range(10):  # the survivor answers while the parent starts a new one
        assert httpx.get(f"{base}/accounts/login/", timeout=5).status_code == 200
    wait_for(
        lambda: len(now := _workers(two_workers)) == 2 and first not in now and second in now,
        timeout=30,
        what="a new web worker",
        proc=two_workers,
    )
    assert httpx.get(f"{base}/accounts/login/", timeout=5).status_code == 200


def test_make_up_serves_with_the_workers_it_is_told_and_ctrl_c_stops_them_all(tmp_path):
    """scripts/up.py end to end (no device): the banner, web.log from uvicorn, HUB_WEB_WORKERS processes, then
    SIGINT (Ctrl-C) stops every process of the tree and exits 0."""
    import subprocess
    import sys

    from hub.redis_server import free_port

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_URL", "REDIS_URL", "HUB_", "DJANGO"))
    }
    port = free_port()
    env.update(
        HUB_DATA_DIR=str(tmp_path),
        HUB_PORT=str(port),
        HUB_REDIS_PORT=str(free_port()),
        HUB_DEVICE="none",
        HUB_WEB_WORKERS="3",
        HUB_INSECURE_FAST_HASHER="1",
        # Given, so up.py writes nothing into the checkout's .env.
        HUB_SECRET_KEY="make-up-test",
        HUB_EMULATOR_API_KEY="make-up-test",
        HUB_VAPID_PRIVATE_KEY="make-up-test",
        HUB_REDIS_PASSWORD="make-up-test",
    )
    # make up collects the static files into the checkout's STATIC_ROOT; a manifest left there would switch the
    # servers later tests start to hashed names (hub.settings), so it goes again unless it was there before.
    manifest = BASE / "staticfiles" / "staticfiles.json"
    had_manifest = manifest.exists()
    up = subprocess.Popen(
        [sys.executable, str(BASE / "scripts" / "up.py")],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    tree: list[int] = []
    try:
        lines = []
        for line in up.stdout:
            lines.append(line)
            if "Status page" in line:
                break
        text = "".join(lines)
        assert f"Tiiny Hub is up:  http://127.0.0.1:{port}" in text and "Sign in as admin / " in text, text
        tree = process_tree(up.pid)
        spawned = [pid for pid in tree if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(spawned) == 3
        assert "Uvicorn running on" in (tmp_path / "logs" / "web.log").read_text()
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code in (200, 503)
        up.send_signal(signal.SIGINT)
        rest, _ = up.communicate(timeout=30)
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait()
        if not had_manifest:
            manifest.unlink(missing_ok=True)
    assert up.returncode == 0, rest
    assert "stopping" in rest and "stopped at" in rest
    wait_for(
        lambda: not any(_alive(pid) for pid in tree), timeout=10, what="every process of make up to exit"
    )


def _pg_connections(server) -> int:
    """The test database's connections from ``server``'s processes (named after its pid, see hub.settings)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s",
            [f"tiiny-hub web {server.process.pid}"],
        )
        return cursor.fetchone()[0]


def _needs_postgresql() -> None:
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only (SQLite opens a file, not a server connection)")


def _hammer(base: str, clients: int = 20, each: int = 10) -> None:
    import threading

    def one() -> None:
        with httpx.Client(base_url=base, timeout=30) as client:
            for _ in range(each):
                assert client.get("/healthz").status_code in (200, 503)  # 503: no worker heartbeat here

    threads = [threading.Thread(target=one) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


@pytest.mark.integration
def test_on_postgresql_each_web_process_keeps_at_most_its_pool(two_workers):
    """Every ASGI request runs in a thread of its own: kept per-thread connections were never reused and lingered
    (20 clients on one web process held PostgreSQL's 100). The web processes take theirs from a pool of
    HUB_DB_POOL each: 20 clients at once never hold more than 2 x 8, and the pool keeps a few for the next pages."""
    _needs_postgresql()
    _hammer(two_workers.extra["url"])
    assert 1 <= _pg_connections(two_workers) <= 2 * 8  # HUB_DB_POOL: 8 by default


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_without_the_pool_connections_are_given_back_when_the_requests_end():
    _needs_postgresql()
    proc = start_asgi_server(workers=2, HUB_DB_POOL="0")
    try:
        _hammer(proc.extra["url"])
        wait_for(
            lambda: _pg_connections(proc) == 0, timeout=5, what="the web processes to close their connections"
        )
    finally:
        proc.stop()


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_a_waiting_v1_call_leaves_the_pool_to_the_other_pages(member, device):  # noqa: F811
    """A /v1 image or speech call waits for its render, reading the job's row every POLL_S, for minutes. Holding
    its pooled connection all along, a few such scripts took the whole pool and every page waited for one (20 s,
    then failed). Each read gives it back. One process with a pool of one: the page answers during the wait."""
    import threading
    import time

    from jobs.models import Job
    from jobs.tests.doors.test_v1 import token_for
    from jobs.tests.ui_fixtures import IMAGE

    _needs_postgresql()
    key = token_for(member)
    proc = start_asgi_server(workers=1, HUB_DB_POOL="1", HUB_V1_WAIT_S="8")  # no worker: the job stays queued
    try:
        base = proc.extra["url"]
        waited_call: list[int] = []

        def call() -> None:
            body = {"model": IMAGE, "prompt": "a kite", "size": "512x512"}
            headers = {"Authorization": f"Bearer {key}"}
            waited_call.append(
                httpx.post(
                    f"{base}/v1/images/generations", json=body, headers=headers, timeout=30
                ).status_code
            )

        client = sign_in(base, "mia", PASSWORD)
        script = threading.Thread(target=call)
        script.start()
        wait_for(lambda: Job.objects.filter(prompt="a kite").exists(), timeout=5, what="the call's job")
        time.sleep(0.5)  # into its wait: it has read the row a few times
        started = time.monotonic()
        page = client.get("/jobs/", timeout=30)
        waited = time.monotonic() - started
        assert page.status_code == 200 and waited < 4, (page.status_code, waited)
        assert script.is_alive()  # the call still waits
        script.join(timeout=20)
        assert waited_call == [504]  # HUB_V1_WAIT_S passed: it names the job (test_v1 checks the words)
    finally:
        proc.stop()
