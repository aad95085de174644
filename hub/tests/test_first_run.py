"""First run and everyday polish (issue 11): the calm `make up` console, the LAN hint, the admins' status page,
and jargon only where it helps (dashboard, queue, plan)."""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from hub.celery import BEAT_TICK_KEY, WORKER_HEARTBEAT_KEY
from hub.testing import load_script
from jobs.tests.ui_fixtures import make_job

BASE = Path(__file__).resolve().parents[2]
UP = BASE / "scripts" / "up.py"


def _up():
    return load_script("up")


def _wait_for(predicate, timeout: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


# -- make up: the console and the log files -------------------------------------------------------------
def test_each_process_writes_to_its_own_file_and_the_console_stays_quiet(tmp_path):
    from honcho.printer import Message

    up = _up()
    console = tmp_path / "console.txt"
    with console.open("w") as out:
        router = up.LogRouter(tmp_path / "logs", console=out)
        now = dt.datetime(2026, 12, 1, 21, 30, 5)
        router.write(Message("line", b"daphne listening\n", now, "web", None))
        router.write(Message("line", "task received\nsecond line\n", now, "worker", None))
        router.write(Message("line", "web started (pid=42)\n", now, "system", None))
        router.close()
    assert (tmp_path / "logs" / "web.log").read_text() == "2026-12-01 21:30:05 daphne listening\n"
    assert (tmp_path / "logs" / "worker.log").read_text().splitlines() == [
        "2026-12-01 21:30:05 task received",
        "2026-12-01 21:30:05 second line",
    ]
    assert "web started (pid=42)" in (tmp_path / "logs" / "up.log").read_text()
    assert console.read_text() == ""


def test_a_process_that_stops_by_itself_is_named_on_the_console_but_not_while_stopping(tmp_path):
    from honcho.printer import Message

    up = _up()
    console = tmp_path / "console.txt"
    with console.open("w") as out:
        router = up.LogRouter(tmp_path / "logs", console=out)
        router.write(Message("line", "worker stopped (rc=3)\n", dt.datetime.now(), "system", None))
        router.stopping = True
        router.write(Message("line", "web stopped (rc=-15)\n", dt.datetime.now(), "system", None))
        router.close()
    text = console.read_text()
    assert "worker stopped by itself (exit 3)" in text and "worker.log" in text
    assert "web" not in text


SUPERVISOR = textwrap.dedent(
    """
    import importlib.util, sys
    from pathlib import Path
    spec = importlib.util.spec_from_file_location("up", sys.argv[1])
    up = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(up)
    router = up.LogRouter(Path(sys.argv[2]))
    manager = up.make_manager(router)
    py = sys.executable
    manager.add_process("web", py + ' -c "import time; print(\\'hello from web\\', flush=True); time.sleep(60)"')
    manager.add_process("worker", py + ' -c "import sys, time; time.sleep(float(sys.argv[1])); sys.exit(3)" ' + sys.argv[3])
    try:
        manager.loop()
    finally:
        router.close()
    sys.exit(up.exit_status(manager))
    """
)


def _supervise(tmp_path: Path, worker_lives_s: float) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR, str(UP), str(tmp_path / "logs"), str(worker_lives_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_ctrl_c_stops_every_process_and_exits_0(tmp_path):
    proc = _supervise(tmp_path, worker_lives_s=60)
    web_log = tmp_path / "logs" / "web.log"
    _wait_for(lambda: web_log.exists() and "hello from web" in web_log.read_text(), what="web's first line")
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out
    assert "stopping" in out and "hello from web" not in out and "Error" not in out
    assert "SIGINT received" in (tmp_path / "logs" / "up.log").read_text()


def test_a_process_giving_up_stops_the_hub_with_its_code(tmp_path):
    proc = _supervise(tmp_path, worker_lives_s=0.5)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 3
    assert "worker stopped by itself (exit 3)" in out and "stopping…" not in out


def test_own_terminal_changes_nothing_without_a_terminal():
    up = _up()
    before = os.getpgrp()
    give_back = up.own_terminal()  # pytest's stdin is not a terminal
    give_back()
    assert os.getpgrp() == before


def test_the_banner_shows_the_url_the_login_and_how_to_open_it_from_a_phone(tmp_path):
    up = _up()
    text = up.banner_text(
        host="127.0.0.1",
        port=8000,
        login="Sign in as admin / s3cret-pass  (shown once)",
        lan="192.168.1.23",
        allowed_hosts=["127.0.0.1", "localhost", "[::1]"],
        log_dir=up.BASE / "var" / "logs",
    )
    lines = [line.strip() for line in text.splitlines()]
    assert "Tiiny Hub is up:  http://127.0.0.1:8000" in lines
    assert "Sign in as admin / s3cret-pass  (shown once)" in lines
    assert "HUB_HOST=0.0.0.0 HUB_ALLOWED_HOSTS=127.0.0.1,localhost,[::1],192.168.1.23 make up" in lines
    assert "then open http://192.168.1.23:8000" in lines
    assert any(line.startswith("Logs: var/logs/") and "make logs" in line for line in lines)


def test_the_banner_on_the_lan_gives_the_phone_address_or_the_missing_allowed_host():
    up = _up()
    common = {"port": 8001, "login": "x", "lan": "10.0.0.7", "log_dir": Path("/tmp/hub/logs")}
    allowed = up.banner_text(host="0.0.0.0", allowed_hosts=["localhost", "10.0.0.7"], **common)
    assert "Tiiny Hub is up:  http://127.0.0.1:8001" in allowed  # never http://0.0.0.0
    assert "From a phone on this network: http://10.0.0.7:8001" in allowed
    missing = up.banner_text(host="0.0.0.0", allowed_hosts=["localhost"], **common)
    assert "HUB_HOST=0.0.0.0 HUB_ALLOWED_HOSTS=localhost,10.0.0.7 make up" in missing
    unknown = up.banner_text(host="127.0.0.1", allowed_hosts=["localhost"], **{**common, "lan": None})
    assert "HUB_ALLOWED_HOSTS=localhost,<this machine's address>" in unknown


def test_the_lan_address_is_a_private_one_or_none():
    up = _up()
    address = up.lan_address()
    if address is not None:
        ip = ipaddress.ip_address(address)
        assert ip.is_private and not ip.is_loopback
    assert not up._is_lan("127.0.0.1") and not up._is_lan("8.8.8.8") and not up._is_lan("169.254.1.1")
    assert up._is_lan("192.168.1.20") and up._is_lan("10.1.2.3")


def test_make_logs_follows_the_files_under_the_data_dir(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "web.log").write_text("earlier line\n")
    proc = subprocess.Popen(
        ["make", "-s", "--no-print-directory", "logs"],
        cwd=BASE,
        env={**os.environ, "HUB_DATA_DIR": str(tmp_path)},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        seen: list[str] = []

        def saw(text: str) -> bool:
            while text not in "".join(seen):
                seen.append(proc.stdout.readline())
            return True

        assert saw("earlier line")
        with (logs / "worker.log").open("a") as f:  # a file that appears later is followed too (tail -F)
            f.write("a new worker line\n")
        assert saw("a new worker line")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def test_the_readme_tells_how_to_recover_the_admin_password_and_follow_the_logs():
    readme = (BASE / "README.md").read_text()
    assert "make logs" in readme and "HUB_PUBLIC_URL" in readme and "docs/troubleshooting.md" in readme
    troubleshooting = (BASE / "docs" / "troubleshooting.md").read_text()
    assert ".venv/bin/python manage.py changepassword" in troubleshooting


# -- the admins' status page --------------------------------------------------------------------------------
@pytest.fixture
def _health_keys(redis_client):
    redis_client.zadd(WORKER_HEARTBEAT_KEY, {"w@host": time.time() - 2})
    redis_client.set(BEAT_TICK_KEY, time.time() - 1)
    yield
    redis_client.delete(WORKER_HEARTBEAT_KEY, BEAT_TICK_KEY)


CONFIGURED_VENDOR = {"django.db.backends.sqlite3": "sqlite", "django.db.backends.postgresql": "postgresql"}


@pytest.mark.django_db
def test_the_status_page_reads_each_part_devices_and_the_queue(admin_client, member, device, _health_keys):
    make_job(member, device, state="queued")
    make_job(member, device, state="queued", prompt="second")
    make_job(member, device, state="running")
    response = admin_client.get("/health/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode()))
    assert "All parts are working." in text
    configured = CONFIGURED_VENDOR[settings.DATABASES["default"]["ENGINE"]]  # the suite runs on either
    for part in (
        f"Database ok {configured}",
        "Redis (queue, live updates) ok ping ok",
        "Worker heartbeat ok heartbeat",
    ):
        assert part in text
    assert "Beat tick (repair sweep, device polls) ok tick" in text
    assert "2 jobs waiting · 1 rendering now" in text
    assert "Pocket" in text and "Online" in text


@pytest.mark.django_db
def test_the_status_page_says_what_fails(admin_client, redis_client):
    redis_client.delete(WORKER_HEARTBEAT_KEY, BEAT_TICK_KEY)
    text = re.sub(r"<[^>]+>", " ", admin_client.get("/health/").content.decode())
    assert "Something needs attention." in text and "no worker has ever reported a heartbeat" in text


@pytest.mark.django_db
def test_only_admins_see_the_status_page_and_its_link(admin_client, member_client, viewer_client):
    assert member_client.get("/health/").status_code == 403
    assert viewer_client.get("/health/").status_code == 403
    assert Client().get("/health/").status_code == 302  # to the sign-in page
    assert 'id="footer-health" href' not in member_client.get("/").content.decode()
    assert 'href="/health/"' not in viewer_client.get("/").content.decode()
    assert '<a href="/health/" id="footer-health">health</a>' in admin_client.get("/").content.decode()


@pytest.mark.django_db
def test_healthz_stays_json_for_machines(admin_client):
    for client in (Client(), admin_client):
        response = client.get("/healthz")
        assert response["Content-Type"] == "application/json"
        assert response.json()["status"] in ("ok", "failing")


# -- jargon only where it helps -------------------------------------------------------------------------------
@pytest.mark.django_db
def test_the_live_wire_card_is_for_admins(admin_client, member_client, viewer_client, device):
    assert 'id="live-wire-button"' in admin_client.get("/").content.decode()
    for client in (member_client, viewer_client):
        html = client.get("/").content.decode()
        assert 'id="live-wire-button"' not in html and "Live connection check" not in html


@pytest.mark.django_db
def test_a_viewer_is_not_told_to_queue_a_render(viewer_client, device):
    for path in ("/", "/jobs/queue/", "/jobs/", f"/devices/{device.pk}/", "/devices/"):
        text = viewer_client.get(path).content.decode().lower()
        assert "queue a render" not in text and "queue your first render" not in text, path


@pytest.mark.django_db
def test_a_private_running_job_names_its_owner_once(viewer_client, member, device):
    make_job(member, device, kind="mesh", state="running")
    html = viewer_client.get("/").content.decode()
    running = html[html.index(f'id="device-{device.pk}-running"') :]
    running = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", running[: running.index("</section>")]))
    assert "3D model by mia" in running and "mia · mia" not in running and running.count("mia") == 1


@pytest.mark.django_db
def test_memory_summaries_and_the_npu_budget_are_rendered_for_admins_only(
    admin_client, member_client, viewer_client, device
):
    from devices.capabilities import Capabilities, VaultCap
    from devices.models import Device

    caps = Capabilities.from_dict(device.capabilities)
    caps.vault = VaultCap(
        summary_start_hour=23, summary_end_hour=5, summary_model="Qwen/Qwen3.6-35B-A3B-turbo"
    )
    Device.objects.filter(pk=device.pk).update(
        capabilities=caps.to_dict(), npu_units_used=40, npu_units_total=100
    )
    for path in ("/", f"/devices/{device.pk}/", "/jobs/queue/", f"/jobs/new/?device={device.pk}"):
        admin = admin_client.get(path).content.decode()
        # The gauges are on the dashboard and the device page, the plan on the dashboard, queue and new-job pages.
        assert "NPU budget 40 / 100 units" in admin or "/jobs/" in path, path
        assert "Memory summaries 23:00" in admin or "/devices/" in path, path
        for client in (member_client, viewer_client):  # not hidden by CSS: not in the page at all
            html = client.get(path).content.decode()
            assert "NPU budget" not in html and "Memory summaries" not in html, path


def test_no_template_says_tonights_plan():
    for path in (BASE / "templates").rglob("*.html"):
        text = path.read_text().lower()
        assert "tonight's plan" not in text and "tonight&#x27;s plan" not in text, path


# -- the admins' queue: each device once ------------------------------------------------------------------------
@pytest.mark.django_db
def test_the_admin_queue_shows_each_device_once(admin_client, viewer_client, member, device):
    make_job(member, device, state="queued", prompt="a waiting fox")
    html = admin_client.get("/jobs/queue/").content.decode()
    headings = re.findall(r"<h2[^>]*>(.*?)</h2>", html, re.S)
    assert sum("Pocket" in h for h in headings) == 1
    # the everyone-view is still there (folded), so the live pushes for it find their elements
    assert f'id="device-{device.pk}-running"' in html and f'id="device-{device.pk}-queue"' in html
    assert f'<details class="queue-public" id="q-{device.pk}-public">' in html
    viewer = viewer_client.get("/jobs/queue/").content.decode()
    assert sum("Pocket" in h for h in re.findall(r"<h2[^>]*>(.*?)</h2>", viewer, re.S)) == 1
    assert "queue-public" not in viewer and "queue-admin" not in viewer


CHILD_OF_MAKE = textwrap.dedent(
    """
    import importlib.util, os, signal, sys, threading, time
    spec = importlib.util.spec_from_file_location("up", sys.argv[1])
    up = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(up)
    os.setpgid(0, 0)  # what own_terminal does: a group of our own, so make's group signal misses us
    signal.signal(signal.SIGTERM, lambda *_: (print("got SIGTERM", flush=True), os._exit(0)))
    threading.Thread(target=up.stop_when_orphaned, daemon=True).start()
    print("ready", flush=True)
    time.sleep(30)
    print("never stopped", flush=True)
    """
)


def test_a_sigint_to_makes_own_group_still_stops_the_hub(tmp_path):
    """`kill -INT -<make's group>` no longer reaches up.py (its own group), yet make waits for it: up.py notices
    make dropping its handler and stops."""
    (tmp_path / "child.py").write_text(CHILD_OF_MAKE)
    (tmp_path / "Makefile").write_text(f"run:\n\t@{sys.executable} {tmp_path / 'child.py'} {UP}\n")
    make = subprocess.Popen(
        ["make", "-s", "-f", str(tmp_path / "Makefile")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        # As from a terminal: make catches SIGINT only if it was not ignored when make started, and a suite
        # run in the background of a non-interactive shell (`pytest &`) hands SIGINT down ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert make.stdout.readline().strip() == "ready"
    up = _up()
    assert signal.SIGINT in (up.caught_signals(make.pid) or set())
    os.killpg(make.pid, signal.SIGINT)
    out, _ = make.communicate(timeout=15)
    assert "make was interrupted; stopping" in out and "got SIGTERM" in out and "never stopped" not in out


def test_a_console_that_is_gone_does_not_stop_the_shutdown(tmp_path):
    """A closed terminal (EIO) or pipe (EPIPE) once made the Ctrl-C handler raise and leave the processes running."""
    up = _up()
    read_end, write_end = os.pipe()
    os.close(read_end)
    broken = open(write_end, "w")  # closed by hand below: its close re-raises the EPIPE
    up.tell("tiiny-hub: stopping…", file=broken)  # EPIPE, swallowed
    with contextlib.suppress(BrokenPipeError):
        broken.close()
    closed = (tmp_path / "c.txt").open("w")
    closed.close()
    up.tell("tiiny-hub: stopping…", file=closed)  # ValueError on a closed file, swallowed


def test_the_first_login_stays_on_the_terminal_but_never_reaches_systemds_journal(tmp_path, monkeypatch):
    up = _up()
    line = "first admin: admin / s3cret-pass-word"
    monkeypatch.delenv("INVOCATION_ID", raising=False)
    assert up.login_line(line, tmp_path) == "Sign in as admin / s3cret-pass-word"
    monkeypatch.setenv("INVOCATION_ID", "0123456789abcdef")  # systemd sets it for a unit's processes
    shown = up.login_line(line, tmp_path)
    saved = tmp_path / up.FIRST_LOGIN_FILE
    assert "s3cret" not in shown and str(saved) in shown
    assert "admin / s3cret-pass-word" in saved.read_text() and saved.stat().st_mode & 0o777 == 0o600
    assert up.login_line("admin exists", tmp_path).startswith("Sign in with your admin login")


def test_the_banners_status_page_is_the_hubs_whatever_device_it_emulates():
    up = _up()
    common = {"host": "127.0.0.1", "port": 8000, "login": "x", "lan": None, "allowed_hosts": ["localhost"]}
    for emulated in (
        [("Tiiny (emulator)", "http://127.0.0.1:8800")],
        [("A", "http://127.0.0.1:8800")] * 2,
        None,
    ):
        text = up.banner_text(**common, log_dir=Path("/tmp/hub/logs"), emulated=emulated)
        status = [line.strip() for line in text.splitlines() if "Status page" in line]
        assert status == ["Status page (admins): http://127.0.0.1:8000/health/  ·  Stop: Ctrl-C"], text
