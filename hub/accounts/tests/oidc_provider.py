"""A real OpenID Connect provider on loopback for the single sign-on tests: django-oauth-toolkit (a maintained
authorization server from PyPI) as the tiny Django project in ``oidc_op/``, in a process of its own with its own
SQLite database and RSA key. Never a mock: the hub's OIDC code talks to it over HTTP as it would to Authelia or
Keycloak (discovery, the authorization endpoint, the token endpoint with PKCE, the keys, userinfo)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from hub.testing import Proc, free_port, log_dir, wait_for

PROJECT = Path(__file__).resolve().parent / "oidc_op"
CLIENT_ID, CLIENT_SECRET, PASSWORD = "hub-client", "hub-client-secret", "provider-pass"


def _env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "HUB_", "DATABASE_URL"))}
    env.update(
        PYTHONPATH=str(PROJECT),
        DJANGO_SETTINGS_MODULE="op_settings",
        OP_DB=str(folder / "op.sqlite3"),
        OP_KEY=str(folder / "op-key.pem"),
        PYTHONUNBUFFERED="1",
    )
    return env


def start_provider(folder: Path, redirect_uris: list[str]) -> Proc:
    """Migrate, seed (alice in hub-admins, bob in family, carol in none) and serve the provider; returns its Proc
    with ``extra["issuer"]`` once its discovery document answers."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (folder / "op-key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    env = _env(folder)
    for args in (["-m", "django", "migrate", "-v", "0"], [str(PROJECT / "op_seed.py"), *redirect_uris]):
        done = subprocess.run([sys.executable, *args], env=env, cwd=PROJECT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
    port = free_port()
    proc = Proc(
        "oidc-provider",
        [
            sys.executable,
            "-m",
            "uvicorn",
            "op_asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--lifespan",
            "off",
        ],  # fmt: skip
        env,
        log_dir() / f"oidc-provider-{port}.log",
    )
    proc.start()
    issuer = f"http://127.0.0.1:{port}/o"
    proc.extra["issuer"] = issuer
    proc.extra["url"] = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(up, timeout=60, what="the OpenID provider", proc=proc)
    except BaseException:
        proc.stop()
        raise
    return proc


def add_redirect_uri(provider: Proc, uri: str) -> None:
    """Register one more redirect URI of the hub's client (a hub whose address is known only once it runs)."""
    code = (
        "import django, sys; django.setup(); from oauth2_provider.models import Application; "
        "app = Application.objects.get(client_id=sys.argv[1]); "
        "app.redirect_uris = app.redirect_uris + ' ' + sys.argv[2]; app.save()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, CLIENT_ID, uri],
        env=provider.env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def provider_sign_in(provider: Proc, username: str) -> httpx.Client:
    """A browser's session at the provider, signed in there as ``username`` (its own login form)."""
    client = httpx.Client(base_url=provider.extra["url"], timeout=30)
    page = client.get("/login/")
    token = client.cookies["op_csrftoken"]
    response = client.post(
        "/login/",
        data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token, "next": "/o/"},
        headers={"Referer": f"{provider.extra['url']}/login/"},
    )
    assert response.status_code == 302, (page.status_code, response.text[:500])
    return client
