"""Webhook channels: a JSON body signed with HMAC-SHA256 over timestamp + body, checked by a receiver on
loopback; retries with backoff, each attempt on record; the secret never shown back in full."""

from __future__ import annotations

import hashlib
import hmac
import json
import time

import pytest

from hub.tests.leakguard import register_key
from notify.models import Channel, Delivery
from notify.services import channel_create, channel_test, delivery_attempt

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("allow_loopback")]
SECRET = "whsec-9f2c1e7d-only-the-receiver-knows"


def verify(secret: str, headers: dict[str, str], body: bytes, *, max_age: int = 300) -> bool:
    """What a receiver does (the README shows the same): recompute the HMAC, compare in constant time."""
    stamp = headers["x-hub-timestamp"]
    if abs(time.time() - int(stamp)) > max_age:
        return False
    expected = "sha256=" + hmac.new(secret.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, headers["x-hub-signature-256"])


def webhook(owner, url: str, secret: str = SECRET) -> Channel:
    register_key(secret, "a webhook secret")
    return channel_create(owner=owner, kind="webhook", name="My hook", url=url, secret=secret)


def test_it_signs_the_body_and_the_receiver_verifies_it(member, receiver):
    r = receiver([200])
    channel = webhook(member, f"{r.url}/hook")
    delivery = channel_test(channel=channel)

    assert delivery_attempt(delivery_id=delivery.pk) == "sent"

    (got,) = r.wait(1)
    assert got.path == "/hook"
    assert got.headers["content-type"] == "application/json"
    assert verify(SECRET, got.headers, got.body)
    assert not verify("another secret", got.headers, got.body)
    assert not verify(SECRET, got.headers, got.body + b" ")  # a changed body fails
    payload = json.loads(got.body)
    assert payload["event"] == "test" and payload["delivery"] == delivery.pk and payload["attempt"] == 1
    assert got.headers["x-hub-event"] == "test"
    delivery.refresh_from_db()
    assert delivery.status == "sent" and delivery.finished_at and delivery.reason == ""


def test_it_claims_a_delivery_once(member, receiver):
    r = receiver([200])
    delivery = channel_test(channel=webhook(member, r.url))
    assert delivery_attempt(delivery_id=delivery.pk) == "sent"
    assert delivery_attempt(delivery_id=delivery.pk) == ""  # a second run of the task sends nothing
    assert len(r.requests) == 1


def test_it_retries_with_each_attempt_recorded(member, receiver, fast_retries):
    r = receiver([500, 503, 200])
    delivery = channel_test(channel=webhook(member, r.url))

    assert delivery_attempt(delivery_id=delivery.pk) == "retrying"
    second = Delivery.objects.get(key=delivery.key, attempt=2)
    assert delivery_attempt(delivery_id=second.pk) == "retrying"
    third = Delivery.objects.get(key=delivery.key, attempt=3)
    assert delivery_attempt(delivery_id=third.pk) == "sent"

    rows = list(
        Delivery.objects.filter(key=delivery.key)
        .order_by("attempt")
        .values_list("attempt", "status", "reason")
    )
    assert rows == [
        (1, "retrying", "refused: HTTP 500"),
        (2, "retrying", "refused: HTTP 503"),
        (3, "sent", ""),
    ]
    # every attempt was signed afresh with its own number
    assert [json.loads(x.body)["attempt"] for x in r.requests] == [1, 2, 3]
    assert all(verify(SECRET, x.headers, x.body) for x in r.requests)


def test_it_gives_up_after_the_last_retry(member, receiver, fast_retries):
    r = receiver([500])
    delivery = channel_test(channel=webhook(member, r.url))
    for attempt in (1, 2):
        assert (
            delivery_attempt(delivery_id=Delivery.objects.get(key=delivery.key, attempt=attempt).pk)
            == "retrying"
        )
    last = Delivery.objects.get(key=delivery.key, attempt=3)
    assert delivery_attempt(delivery_id=last.pk) == "failed"
    assert not Delivery.objects.filter(key=delivery.key, attempt=4).exists()
    last.refresh_from_db()
    assert last.reason == "refused: HTTP 500"


@pytest.mark.parametrize("status", [410, 401, 301])
def test_a_refusal_or_a_redirect_is_not_retried(member, receiver, fast_retries, status):
    r = receiver([status])
    delivery = channel_test(channel=webhook(member, r.url))
    assert delivery_attempt(delivery_id=delivery.pk) == "failed"
    assert Delivery.objects.filter(key=delivery.key).count() == 1
    assert len(r.requests) == 1  # a redirect is not followed


@pytest.mark.parametrize("status", [429, 408, 502])
def test_later_is_retried(member, receiver, fast_retries, status):
    r = receiver([status])
    delivery = channel_test(channel=webhook(member, r.url))
    assert delivery_attempt(delivery_id=delivery.pk) == "retrying"


def test_an_unreachable_receiver_is_a_reason_without_the_url(member, fast_retries):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/hook/tok-7a8b9c0d1e2f"
    delivery = channel_test(channel=webhook(member, url))
    assert delivery_attempt(delivery_id=delivery.pk) == "retrying"
    delivery.refresh_from_db()
    assert delivery.reason == "could not connect"
    assert "tok-7a8b9c0d1e2f" not in delivery.reason


def test_the_secret_is_generated_when_left_empty_and_shown_masked(member):
    channel = channel_create(owner=member, kind="webhook", name="h", url="https://example.invalid/x")
    from notify.crypto import unseal

    secret = unseal(channel.sealed)["secret"]
    assert len(secret) >= 32
    assert channel.display == "https://example.invalid/… · signed"


def test_a_bad_url_is_refused(member):
    from django.core.exceptions import ValidationError

    for url in ("ftp://x/y", "not a url", "http:///nohost"):
        with pytest.raises(ValidationError):
            channel_create(owner=member, kind="webhook", name="h", url=url)
