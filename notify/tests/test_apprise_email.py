"""Apprise through its json:// schema to a receiver on loopback (no network), and email through locmem."""

from __future__ import annotations

import json

import pytest
from django.core import mail

from hub.tests.leakguard import register_key
from notify.models import Delivery
from notify.services import channel_create, channel_test, delivery_attempt
from notify.tests.confirming import confirmed

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("allow_loopback")]


def test_apprise_json_reaches_the_receiver(member, receiver):
    r = receiver([200])
    host_port = r.url.removeprefix("http://")
    channel = channel_create(owner=member, kind="apprise", name="Phone", url=f"json://{host_port}/apprise-in")
    assert channel.display == "JSON (json://…)"

    delivery = channel_test(channel=channel)
    assert delivery_attempt(delivery_id=delivery.pk) == "sent"

    (got,) = r.wait(1)
    assert got.path == "/apprise-in"
    payload = json.loads(got.body)
    assert payload["title"] == "Test from Tiiny Hub"
    assert "Channel: “Phone”" in payload["message"]


def test_apprise_failure_is_recorded_without_the_token(member, receiver, fast_retries):
    r = receiver([500])
    token = "tok-ab12cd34ef56"
    register_key(token, "an Apprise URL's token")
    url = f"json://{r.url.removeprefix('http://')}/{token}"
    delivery = channel_test(channel=channel_create(owner=member, kind="apprise", name="x", url=url))

    assert delivery_attempt(delivery_id=delivery.pk) == "retrying"
    delivery.refresh_from_db()
    assert delivery.reason == "refused: the service did not take it"
    assert token not in delivery.reason
    assert Delivery.objects.filter(key=delivery.key, attempt=2, status="pending").exists()


def test_the_masked_form_never_holds_a_token(member):
    for url, shown in [
        ("tgram://123456789:AAbbCCddEEff/987654", "Telegram (tgram://…)"),
        ("ntfy://my-private-topic-77", "ntfy (ntfy://…)"),
        ("pover://userkey123@apptoken456", "Pushover (pover://…)"),
    ]:
        assert channel_create(owner=member, kind="apprise", name="x", url=url).display == shown


def test_an_unknown_apprise_url_is_refused_with_a_hint(member):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as err:
        channel_create(owner=member, kind="apprise", name="x", url="nosuchservice://abc")
    assert "ntfy://" in str(err.value)


def test_email_goes_through_the_configured_backend(member, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    channel = confirmed(channel_create(owner=member, kind="email", name="Mail", address="mia@example.org"))
    delivery = channel_test(channel=channel)

    assert delivery_attempt(delivery_id=delivery.pk) == "sent"
    (sent,) = mail.outbox
    assert sent.to == ["mia@example.org"]
    assert sent.subject == "Test from Tiiny Hub"
    assert "/notify/" in sent.body


def test_an_email_channel_needs_an_address(member):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        channel_create(owner=member, kind="email", name="Mail", address="")
