"""The hub behind a reverse proxy (issue 24): the documented nginx and Caddy files, served for real.

Each proxy runs from the file in docs/deploy/ with only its marked values replaced (host name, certificate, the
hub's port, the result folder), over HTTPS on a free loopback port, in front of the hub's real web server started
with the settings docs/deploy/README.md gives. Through it: the sign-in page and a signed-in page, a websocket push
from the worker, and a Range download of a result file the proxy sends itself (X-Accel-Redirect).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import pwd
import re
import secrets
import shutil
import ssl
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import websockets
from django.conf import settings

from conftest import PASSWORD
from hub.redis_server import free_port
from hub.testing import Proc, child_env, log_dir, post_sign_in, run_async, sign_in, wait_for
from hub.webserver import command as web_command

BASE = Path(__file__).resolve().parents[2]
DEPLOY = BASE / "docs" / "deploy"
HOST = "localhost"
DOC_HOST = "hub.example.lan"  # the host name the documents use


# -- what the documents say -----------------------------------------------------------------------------------
def documented_env() -> dict[str, str]:
    """The hub's settings behind a proxy, from the ```env block of docs/deploy/README.md."""
    text = (DEPLOY / "README.md").read_text()
    block = re.search(r"```env\n(.*?)```", text, re.S)
    assert block, "docs/deploy/README.md has no ```env block"
    values = {}
    for line in block.group(1).splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def for_this_test(values: dict[str, str], origin: str) -> dict[str, str]:
    """The documented settings, with the test's host and origin in place of hub.example.lan."""
    https_doc = f"https://{DOC_HOST}"
    return {k: v.replace(https_doc, origin).replace(DOC_HOST, HOST) for k, v in values.items()}


def substitute(text: str, replacements: dict[str, str]) -> str:
    """Replace each documented value once at least; a value the document no longer has fails the test."""
    for old, new in replacements.items():
        assert old in text, f"the document no longer says {old!r}"
        text = text.replace(old, new)
    return text


def test_the_documented_settings_are_the_hubs_own():
    env = documented_env()
    assert env["HUB_HTTPS"] == "1" and env["JOBS_SENDFILE"] == "x-accel"
    assert env["HUB_ALLOWED_HOSTS"] == DOC_HOST
    assert env["HUB_CSRF_TRUSTED_ORIGINS"] == env["HUB_PUBLIC_URL"] == f"https://{DOC_HOST}"


def _seconds(value: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600, "": 1}
    match = re.fullmatch(r"(\d+)(s|m|h|)", value)
    assert match, value
    return int(match.group(1)) * units[match.group(2)]


def _megabytes(value: str) -> int:
    """nginx's 30m is 30 MiB; Caddy's 30MB is 30,000,000 bytes (and 30MiB is 30 MiB)."""
    match = re.fullmatch(r"(\d+)(m|MiB|MB)", value)
    assert match, value
    return int(match.group(1)) * (1_000_000 if match.group(2) == "MB" else 1024 * 1024)


def test_the_nginx_file_outwaits_v1_and_takes_the_largest_upload():
    text = (DEPLOY / "nginx.conf").read_text()
    v1 = re.search(r"location /v1/ \{(.*?)\}", text, re.S).group(1)
    assert _seconds(re.search(r"proxy_read_timeout (\S+);", v1).group(1)) > settings.HUB_V1_WAIT_S
    assert (
        _megabytes(re.search(r"client_max_body_size (\S+);", text).group(1))
        > settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    )
    assert f"location {settings.JOBS_SENDFILE_PREFIX} {{" in text and "internal;" in text


def test_the_caddyfile_outwaits_v1_and_takes_the_largest_upload():
    text = (DEPLOY / "Caddyfile").read_text()
    assert _seconds(re.search(r"read_timeout (\S+)", text).group(1)) > settings.HUB_V1_WAIT_S
    assert _megabytes(re.search(r"max_size (\S+)", text).group(1)) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE


@pytest.mark.integration
def test_the_caddyfile_is_valid_and_formatted_as_it_stands(tmp_path):
    """As a person copies it: Caddy reads it with no change and no warning (`caddy fmt` would change nothing)."""
    caddy = shutil.which("caddy")
    if caddy is None:
        pytest.fail(
            "caddy is missing: make test installs it (scripts/need-nginx.sh), or `apt-get install -y caddy`"
        )
    adapted = subprocess.run(
        [caddy, "adapt", "--config", str(DEPLOY / "Caddyfile"), "--adapter", "caddyfile"],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **os.environ,
            "HOME": str(tmp_path),
            "XDG_CONFIG_HOME": str(tmp_path),
            "XDG_DATA_HOME": str(tmp_path),
        },
    )
    assert adapted.returncode == 0 and '"warn"' not in adapted.stderr, adapted.stderr
    assert '"read_timeout":960000000000' in adapted.stdout and '"X-Accel-Redirect":["*"]' in adapted.stdout


def test_check_deploy_is_clean_with_the_documented_proxy_settings(tmp_path):
    """Silenced on purpose in hub/settings.py: W005 (HSTS includeSubDomains) and W021 (HSTS preload)."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "HUB_SECRET_KEY": secrets.token_urlsafe(50),
        "HUB_DATA_DIR": str(tmp_path / "data"),
        **documented_env(),
    }
    proc = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=BASE,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "System check identified no issues (0 silenced)" not in proc.stdout  # W005/W021 stay silenced
    assert "System check identified no issues" in proc.stdout


# -- a certificate, the hub, the proxies ----------------------------------------------------------------------
@dataclass
class Front:
    """A proxy in front of the hub: its HTTPS address and how to trust its certificate."""

    name: str
    url: str
    ssl: ssl.SSLContext
    proc: Proc
    extra: dict = field(default_factory=dict)


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost (and 127.0.0.1), as a household's own CA would give."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(HOST), x509.IPAddress(__import__("ipaddress").ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "hub.pem", folder / "hub.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    key_path.chmod(0o600)
    return cert_path, key_path


@pytest.fixture(scope="module")
def front_ports():
    return {"https": free_port(), "http": free_port()}


@pytest.fixture(scope="module")
def hub_server(django_db_setup, django_db_blocker, front_ports):
    """The hub's web server (one process) with the documented proxy settings, on a free port of loopback."""
    port = free_port()
    origin = f"https://{HOST}:{front_ports['https']}"
    env = for_this_test(documented_env(), origin)
    with django_db_blocker.unblock():
        proc = Proc(
            "web",
            web_command("127.0.0.1", port, n_workers=1),
            child_env(**env),
            log_dir() / f"web-proxy-{port}.log",
        )
    proc.start()
    proc.extra.update(port=port, url=f"http://127.0.0.1:{port}", origin=origin)

    def up() -> bool:  # /healthz is exempt from the HTTPS redirect; the Host must be an allowed one
        try:
            return httpx.get(
                f"{proc.extra['url']}/healthz", headers={"Host": HOST}, timeout=1
            ).status_code in (200, 503)
        except httpx.HTTPError:
            return False

    wait_for(up, timeout=60, what="the hub's web server", proc=proc)
    yield proc
    proc.stop()


def _user_line() -> str:
    """Root starts nginx's workers as 'nobody' unless told: as this user instead, who owns the test's files."""
    return f"user {pwd.getpwuid(os.getuid()).pw_name};\n" if os.geteuid() == 0 else ""


def start_nginx(folder: Path, hub: Proc, ports: dict[str, int]) -> Front:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        pytest.fail(
            "nginx is missing: make test installs it (scripts/need-nginx.sh), or `apt-get install -y nginx`"
        )
    cert, key = make_certificate(folder)
    site = substitute(
        (DEPLOY / "nginx.conf").read_text(),
        {
            "server 127.0.0.1:8000;": f"server 127.0.0.1:{hub.extra['port']};",
            f"server_name {DOC_HOST};": f"server_name {HOST};",
            f"/etc/ssl/certs/{DOC_HOST}.pem": str(cert),
            f"/etc/ssl/private/{DOC_HOST}.key": str(key),
            "alias /srv/tiiny-hub/var/media/;": f"alias {Path(settings.MEDIA_ROOT).resolve()}/;",
            "listen 443 ssl;": f"listen 127.0.0.1:{ports['https']} ssl;",
            "listen [::]:443 ssl;": "",
            "listen 80;": f"listen 127.0.0.1:{ports['http']};",
            "listen [::]:80;": "",
        },
    )
    (folder / "tiiny-hub.conf").write_text(site)
    temp = "\n".join(
        f"    {kind}_temp_path {folder / 'tmp' / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    mime = "    include /etc/nginx/mime.types;\n" if Path("/etc/nginx/mime.types").exists() else ""
    (folder / "nginx.conf").write_text(
        f"{_user_line()}worker_processes 1;\nevents {{ worker_connections 256; }}\nhttp {{\n{mime}"
        f"    default_type application/octet-stream;\n    access_log {folder / 'access.log'};\n{temp}\n"
        f"    include {folder / 'tiiny-hub.conf'};\n}}\n"
    )
    (folder / "tmp").mkdir()
    args = [nginx, "-p", str(folder), "-e", str(folder / "error.log"), "-c", str(folder / "nginx.conf")]
    tested = subprocess.run([*args, "-t"], capture_output=True, text=True, timeout=30)
    assert tested.returncode == 0, tested.stderr
    proc = Proc(
        "nginx",
        [*args, "-g", f"daemon off; pid {folder / 'nginx.pid'};"],
        dict(os.environ),
        folder / "nginx.out",
    )
    proc.start()
    context = ssl.create_default_context(cafile=str(cert))
    url = f"https://{HOST}:{ports['https']}"
    wait_for(lambda: _answers(url, context), timeout=30, what="nginx", proc=proc)
    return Front(
        "nginx", url, context, proc, {"http": f"http://{HOST}:{ports['http']}", "log": folder / "error.log"}
    )


def _answers(url: str, context: ssl.SSLContext) -> bool:
    try:
        httpx.get(f"{url}/healthz", verify=context, timeout=1)
    except httpx.HTTPError:
        return False
    return True


def start_caddy(folder: Path, hub: Proc, ports: dict[str, int]) -> Front:
    caddy = shutil.which("caddy")
    if caddy is None:
        pytest.fail(
            "caddy is missing: make test installs it (scripts/need-nginx.sh), or `apt-get install -y caddy`"
        )
    cert, key = make_certificate(folder)
    site = substitute(
        (DEPLOY / "Caddyfile").read_text(),
        {
            f"\n{DOC_HOST} {{": f"\nhttps://{HOST}:{ports['https']} {{",
            "tls internal #": f"tls {cert} {key} #",
            "reverse_proxy 127.0.0.1:8000 {": f"reverse_proxy 127.0.0.1:{hub.extra['port']} {{",
            "root * /srv/tiiny-hub/var/media #": f"root * {Path(settings.MEDIA_ROOT).resolve()} #",
        },
    )
    # The test's own global options: no admin endpoint, state in the test's folder, its own ports.
    options = (
        f"{{\n\tadmin off\n\tskip_install_trust\n\tstorage file_system {folder / 'data'}\n"
        f"\thttp_port {ports['http']}\n\thttps_port {ports['https']}\n}}\n"
    )
    (folder / "Caddyfile").write_text(options + site)
    env = {
        **os.environ,
        "HOME": str(folder),
        "XDG_DATA_HOME": str(folder / "data"),
        "XDG_CONFIG_HOME": str(folder),
    }
    args = [caddy, "run", "--config", str(folder / "Caddyfile"), "--adapter", "caddyfile"]
    proc = Proc("caddy", args, env, folder / "caddy.log")
    proc.start()
    context = ssl.create_default_context(cafile=str(cert))
    url = f"https://{HOST}:{ports['https']}"
    wait_for(lambda: _answers(url, context), timeout=30, what="caddy", proc=proc)
    return Front(
        "caddy", url, context, proc, {"http": f"http://{HOST}:{ports['http']}", "log": folder / "caddy.log"}
    )


@pytest.fixture(scope="module", params=["nginx", "caddy"])
def front(request, hub_server, front_ports, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    proxy = {"nginx": start_nginx, "caddy": start_caddy}[request.param](folder, hub_server, front_ports)
    yield proxy
    proxy.proc.stop()


# -- through the proxy ----------------------------------------------------------------------------------------
@pytest.mark.integration
def test_pages_answer_through_the_proxy(transactional_db, front, member):
    anonymous = httpx.get(f"{front.url}/accounts/login/", verify=front.ssl, timeout=20)
    assert anonymous.status_code == 200 and 'name="csrfmiddlewaretoken"' in anonymous.text
    client = sign_in(front.url, member.username, PASSWORD, verify=front.ssl)
    session = client.cookies.jar
    assert all(cookie.secure for cookie in session if cookie.name in ("sessionid", "csrftoken"))
    page = client.get("/")
    assert page.status_code == 200 and member.username in page.text
    assert "max-age=" in page.headers.get("strict-transport-security", "")  # the hub knows it is HTTPS
    if "http" in front.extra:  # plain HTTP only leads to HTTPS
        plain = httpx.get(f"{front.extra['http']}/jobs/", timeout=20)
        assert (
            plain.status_code in (301, 308)
            and plain.headers["location"] == f"https://{HOST}/jobs/"
            or (plain.headers["location"].startswith(f"https://{HOST}"))
        )


async def _receive_until(ws, needle: str, timeout: float) -> str:
    async def loop():
        while True:
            message = await ws.recv()
            if needle in message:
                return message

    return await asyncio.wait_for(loop(), timeout)


@pytest.mark.integration
def test_a_websocket_push_arrives_through_the_proxy(transactional_db, front, live_worker, admin_user):
    client = sign_in(
        front.url, admin_user.username, PASSWORD, verify=front.ssl
    )  # the live-wire check is an admin's
    cookie = f"sessionid={client.cookies['sessionid']}"
    csrf = client.cookies["csrftoken"]
    ws_url = front.url.replace("https://", "wss://") + f"/ws/hub/?watch=wire:{admin_user.pk}"

    async def scenario() -> str:
        async with websockets.connect(
            ws_url, origin=front.url, additional_headers={"Cookie": cookie}, ssl=front.ssl
        ) as ws:
            response = await asyncio.to_thread(
                client.post,
                "/live-wire/",
                headers={
                    "X-CSRFToken": csrf,
                    "HX-Request": "true",
                    "Origin": front.url,
                    "Referer": f"{front.url}/",
                },
            )
            assert response.status_code == 202, response.text[:500]
            return await _receive_until(ws, 'id="live-wire"', timeout=30)

    fragment = run_async(scenario)
    assert "A worker answered at" in fragment


@pytest.mark.integration
def test_a_range_download_is_sent_by_the_proxy(transactional_db, front, hub_server, member, device):
    from jobs.tests.ui_fixtures import add_artifact, make_job

    data = os.urandom(300_000)
    job = make_job(member, device, state="done")
    # The hub names results itself, in plain ASCII (video.mp4, image-1.png, model.glb). nginx also finds a name
    # the hub had to percent-encode in X-Accel-Redirect; Caddy 2.6 would not (its rewrite escapes the header's
    # value again: %20 becomes %2520), so it is asked for the hub's own kind of name.
    name = "fox in the snow.mp4" if front.name == "nginx" else "video.mp4"
    artifact = add_artifact(job, settings.MEDIA_ROOT, name=name, data=data)
    stored = quote(f"results/{member.pk}/{job.pk}/{name}")
    client = sign_in(front.url, member.username, PASSWORD, verify=front.ssl)
    path = f"/jobs/{job.pk}/files/{artifact.pk}/"

    # What the hub itself answers (asked directly, as the proxy asks it): a redirect for the proxy, no bytes.
    direct = httpx.get(
        f"{hub_server.extra['url']}{path}",
        headers={"Host": HOST, "X-Forwarded-Proto": "https", "Range": "bytes=1000-1999"},
        cookies={"sessionid": client.cookies["sessionid"]},
        timeout=20,
    )
    assert direct.status_code == 200 and direct.content == b""
    assert direct.headers["x-accel-redirect"] == f"/protected-media/{stored}"

    ranged = client.get(path, headers={"Range": "bytes=1000-1999"})
    assert ranged.status_code == 206, ranged.text[:300]
    assert ranged.headers["content-range"] == f"bytes 1000-1999/{len(data)}"
    assert ranged.content == data[1000:2000]
    assert "x-accel-redirect" not in ranged.headers  # the proxy took it
    # The hub's headers that matter for a file survive the hand-over.
    assert ranged.headers["content-type"] == "video/mp4"
    assert name in ranged.headers["content-disposition"]
    assert ranged.headers["cache-control"] == "private, no-cache"
    assert ranged.headers["x-content-type-options"] == "nosniff"
    whole = client.get(path)
    assert whole.status_code == 200 and whole.content == data
    # Nobody reaches the files around the hub's check.
    assert client.get(f"/protected-media/{stored}").status_code == 404
    stranger = httpx.get(f"{front.url}{path}", verify=front.ssl, timeout=20)
    assert stranger.status_code == 302 and not stranger.content.startswith(data[:100])


def client_from(front: Front, address: str) -> httpx.Client:
    """A browser on another machine of the household: its connections leave from ``address`` (127.0.0.0/8 is all
    loopback on Linux), so the proxy sees it as its own client."""
    transport = httpx.HTTPTransport(local_address=address, verify=front.ssl)
    return httpx.Client(base_url=front.url, transport=transport, timeout=20)


@pytest.mark.integration
def test_a_strangers_failed_sign_ins_through_the_proxy_lock_out_the_stranger_only(
    transactional_db, front, member
):
    """With HUB_TRUSTED_PROXIES (documented), the throttle counts each client's own address behind the proxy."""
    stranger, household = client_from(front, "127.0.0.2"), client_from(front, "127.0.0.3")
    with stranger, household:
        # Each guess at another name: the address's own limit (the web server reads the same settings) locks it.
        limit = settings.HUB_SIGNIN_ADDRESS_FAILURES
        fails = [post_sign_in(stranger, f"guess{i}", "wrong-password-1").status_code for i in range(limit)]
        assert fails == [400] * (limit - 1) + [429]  # the login page with the error; the last failure locks
        assert (
            post_sign_in(stranger, member.username, PASSWORD).status_code == 429
        )  # that address, even rightly
        assert post_sign_in(household, member.username, PASSWORD).status_code == 302
