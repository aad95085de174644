"""Web Push end to end without the internet: a push service on loopback takes what pywebpush POSTs; the test
checks the VAPID Authorization header (an ES256 JWT signed with the hub's key, for that origin) and decrypts
the body (RFC 8291, aes128gcm) with the subscription keys it made, as the browser would. Plus `make up`'s
VAPID step: the key is written to .env once, and never printed."""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import time
from pathlib import Path

import http_ece
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from hub.tests.leakguard import register_key
from jobs.tests.ui_fixtures import make_job
from notify import vapid
from notify.models import Delivery
from notify.services import browser_subscribe, delivery_attempt, notify_event

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("allow_loopback")]


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64u(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Browser:
    """What a browser keeps for one push subscription: an ECDH key pair and the auth secret."""

    def __init__(self, endpoint: str) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.auth = os.urandom(16)
        public = self.key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        self.subscription = {"endpoint": endpoint, "keys": {"p256dh": b64u(public), "auth": b64u(self.auth)}}

    def decrypt(self, body: bytes) -> dict:
        return json.loads(
            http_ece.decrypt(body, private_key=self.key, auth_secret=self.auth, version="aes128gcm")
        )


def check_vapid(authorization: str, *, audience: str) -> dict:
    """``vapid t=<JWT>, k=<public key>``: the key is the hub's, the JWT is ES256-signed by it, for ``audience``."""
    scheme, _, params = authorization.partition(" ")
    assert scheme.lower() == "vapid"
    fields = dict(p.strip().split("=", 1) for p in params.split(","))
    assert fields["k"] == vapid.public_key()
    header_b64, claims_b64, signature_b64 = fields["t"].split(".")
    assert json.loads(unb64u(header_b64))["alg"] == "ES256"
    signature = unb64u(signature_b64)
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64u(fields["k"]))
    der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
    public.verify(der, f"{header_b64}.{claims_b64}".encode(), ec.ECDSA(hashes.SHA256()))  # raises if forged
    claims = json.loads(unb64u(claims_b64))
    assert claims["aud"] == audience and claims["exp"] > time.time()
    assert claims["sub"].startswith("mailto:")
    return claims


def test_a_job_done_push_round_trip(member, device, receiver, vapid_key):
    service = receiver([201])
    browser = Browser(f"{service.url}/push/send/sub-1")
    register_key(browser.subscription["keys"]["auth"], "a push subscription's auth secret")
    browser_subscribe(owner=member, subscription=browser.subscription, name="Chromium")
    job = make_job(member, device, state="done", prompt="a lighthouse at dusk")

    (delivery_id,) = notify_event("job.done", job_id=job.pk, key=f"job.done:{job.pk}:2")
    assert delivery_attempt(delivery_id=delivery_id) == "sent"

    (got,) = service.wait(1)
    assert got.path == "/push/send/sub-1"
    assert got.headers["content-encoding"] == "aes128gcm"
    assert int(got.headers["ttl"]) > 0
    check_vapid(got.headers["authorization"], audience=service.url)
    payload = browser.decrypt(got.body)
    assert payload == {
        "title": "Finished: a lighthouse at dusk",
        "body": payload["body"],
        "url": f"/jobs/{job.pk}/",
        "tag": f"hub-job.done-{job.pk}",
    }
    assert "Pocket" in payload["body"]
    # another browser's keys can't read it
    with pytest.raises(Exception):  # noqa: B017 - any decryption failure
        Browser(service.url).decrypt(got.body)


def test_a_gone_subscription_is_a_permanent_failure(member, receiver, vapid_key, fast_retries):
    service = receiver([410])
    channel = browser_subscribe(owner=member, subscription=Browser(f"{service.url}/gone").subscription)
    from notify.services import channel_test

    delivery = channel_test(channel=channel)
    assert delivery_attempt(delivery_id=delivery.pk) == "failed"
    delivery.refresh_from_db()
    assert delivery.reason == "the browser's subscription is gone (HTTP 410)"
    assert Delivery.objects.filter(key=delivery.key).count() == 1  # not retried


def _load_up():
    spec = importlib.util.spec_from_file_location(
        "hub_up_script", Path(__file__).resolve().parents[2] / "scripts/up.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_up_writes_the_vapid_key_once_and_never_prints_it(tmp_path, monkeypatch, capsys):
    up = _load_up()
    env = {k: v for k, v in os.environ.items() if k != "HUB_VAPID_PRIVATE_KEY"}
    env["HUB_DATA_DIR"] = str(tmp_path / "data")
    monkeypatch.setattr(os, "environ", env)
    monkeypatch.setattr(up, "ENV_FILE", tmp_path / ".env")

    up.ensure_env_file()
    lines = (tmp_path / ".env").read_text().splitlines()
    (key_line,) = [line for line in lines if line.startswith("HUB_VAPID_PRIVATE_KEY=")]
    key = key_line.split("=", 1)[1]
    assert len(unb64u(key)) == 32 and len(unb64u(vapid.public_key_for(key))) == 65
    assert (tmp_path / ".env").stat().st_mode & 0o777 == 0o600
    out = capsys.readouterr()
    assert key not in out.out + out.err and "HUB_VAPID_PRIVATE_KEY" in out.out  # the name only

    env.pop("HUB_VAPID_PRIVATE_KEY", None)
    up.ensure_env_file()  # a second run keeps it
    assert (tmp_path / ".env").read_text().count("HUB_VAPID_PRIVATE_KEY=") == 1
    assert key_line in (tmp_path / ".env").read_text()


def test_make_up_adopts_a_key_the_hub_made_for_itself(tmp_path, monkeypatch):
    up = _load_up()
    data = tmp_path / "data"
    data.mkdir()
    made = vapid.generate_private_key()
    (data / vapid.KEY_FILE).write_text(made + "\n")
    env = {k: v for k, v in os.environ.items() if k != "HUB_VAPID_PRIVATE_KEY"}
    env["HUB_DATA_DIR"] = str(data)
    monkeypatch.setattr(os, "environ", env)
    monkeypatch.setattr(up, "ENV_FILE", tmp_path / ".env")
    up.ensure_env_file()
    assert f"HUB_VAPID_PRIVATE_KEY={made}" in (tmp_path / ".env").read_text()
