"""The notification pages: add, edit, test, delete; household channels for admins; the job page's box; the
Web Push endpoints and the service worker. Secrets are never shown back in full."""

from __future__ import annotations

import json

import pytest

from hub.tests.leakguard import register_key
from jobs.tests.ui_fixtures import make_job
from notify.models import Channel, Delivery
from notify.services import channel_create
from notify.tests.confirming import confirmed

pytestmark = pytest.mark.django_db
SECRET = "whsec-page-3d1f0e9a8b7c"
HOOK = "https://hooks.example.org/in/tok-55aa66bb77cc"


def test_the_page_has_an_empty_state(member_client):
    page = member_client.get("/notify/").content.decode()
    assert 'id="channel-empty"' in page and 'id="delivery-list-empty"' in page
    assert 'id="notify-permission"' in page and 'id="notify-sound"' in page


def test_it_adds_a_webhook_and_never_shows_its_secret_or_url(member, member_client):
    register_key(SECRET, "a webhook secret")
    register_key("tok-55aa66bb77cc", "a webhook URL's token")
    answer = member_client.post(
        "/notify/channels/add/",
        {
            "kind": "webhook",
            "name": "Home Assistant",
            "url": HOOK,
            "secret": SECRET,
            "on_done": "on",
            "on_failed": "on",
        },
    )
    assert answer.status_code == 302
    channel = Channel.objects.get(owner=member)
    assert (channel.kind, channel.on_done, channel.on_failed, channel.on_started) == (
        "webhook",
        True,
        True,
        False,
    )
    page = member_client.get("/notify/").content.decode()
    assert "Home Assistant" in page and "https://hooks.example.org/…" in page
    edit = member_client.get(f"/notify/channels/{channel.pk}/").content.decode()
    assert "hooks.example.org" in edit  # the masked form, as a placeholder
    # (the leak guard fails this test if the secret or the token appear in any answer)


def test_a_bad_channel_is_refused_with_a_message(member_client):
    answer = member_client.post("/notify/channels/add/", {"kind": "apprise", "url": "nosuch://x"})
    assert answer.status_code == 400
    assert "Apprise does not know this URL" in answer.content.decode()
    answer = member_client.post("/notify/channels/add/", {"kind": "email", "address": ""})
    assert answer.status_code == 400 and "Enter the address" in answer.content.decode()
    assert not Channel.objects.exists()


def test_editing_keeps_the_stored_secret(member, member_client):
    from notify.crypto import unseal

    channel = channel_create(owner=member, kind="webhook", name="h", url=HOOK, secret=SECRET)
    answer = member_client.post(
        f"/notify/channels/{channel.pk}/", {"name": "renamed", "enabled": "on", "on_started": "on"}
    )
    assert answer.status_code == 302
    channel.refresh_from_db()
    assert channel.name == "renamed" and channel.on_started and not channel.on_done
    assert unseal(channel.sealed) == {"url": HOOK, "secret": SECRET}
    member_client.post(
        f"/notify/channels/{channel.pk}/", {"name": "renamed", "url": "https://other.example.org/x"}
    )
    channel.refresh_from_db()
    assert unseal(channel.sealed) == {"url": "https://other.example.org/x", "secret": SECRET}
    assert not channel.enabled


def test_test_and_delete(member, member_client):
    channel = confirmed(channel_create(owner=member, kind="email", name="Mail", address="mia@example.org"))
    assert member_client.post(f"/notify/channels/{channel.pk}/test/").status_code == 302
    (test,) = Delivery.objects.filter(channel=channel)
    assert test.event == "test" and test.status == "pending"
    page = member_client.get("/notify/").content.decode()
    assert f'id="delivery-{test.pk}"' in page and "Waiting to be sent" in page
    assert member_client.post(f"/notify/channels/{channel.pk}/delete/").status_code == 302
    assert not Channel.objects.exists() and not Delivery.objects.exists()


def test_someone_elses_channel_is_not_found(member, other_client, admin_client):
    channel = channel_create(owner=member, kind="email", name="Mail", address="mia@example.org")
    for client in (other_client, admin_client):
        assert client.get(f"/notify/channels/{channel.pk}/").status_code == 404
        assert client.post(f"/notify/channels/{channel.pk}/delete/").status_code == 404
    assert Channel.objects.filter(pk=channel.pk).exists()


def test_household_channels_are_for_admins(admin_client, member_client):
    assert member_client.get("/notify/household/").status_code == 403
    answer = member_client.post(
        "/notify/channels/add/", {"household": "1", "kind": "email", "address": "x@example.org"}
    )
    assert answer.status_code == 403
    answer = admin_client.post(
        "/notify/channels/add/",
        {"household": "1", "kind": "email", "address": "box@example.org", "name": "Box", "on_device_locked": "on",
         "on_done": "on"},
    )  # fmt: skip
    assert answer.status_code == 302 and answer["Location"] == "/notify/household/"
    channel = Channel.objects.get()
    assert channel.owner is None and channel.on_device_locked and not channel.on_done  # no personal events
    page = admin_client.get("/notify/household/").content.decode()
    assert "Box" in page and "A device is locked" in page
    assert admin_client.get(f"/notify/channels/{channel.pk}/").status_code == 200
    assert member_client.get(f"/notify/channels/{channel.pk}/").status_code == 404


def test_the_job_page_shows_its_deliveries_to_the_owner_only(member, member_client, admin_client, device):
    job = make_job(member, device, state="done", shared=True)
    channel = channel_create(owner=member, kind="email", name="My mail", address="mia@example.org")
    Delivery.objects.create(
        channel=channel,
        job=job,
        event="job.done",
        key="k",
        status="failed",
        reason="the mail server did not take it",
    )
    page = member_client.get(f"/jobs/{job.pk}/").content.decode()
    assert f'id="job-{job.pk}-deliveries"' in page and "the mail server did not take it" in page
    other = admin_client.get(f"/jobs/{job.pk}/").content.decode()
    assert f'id="job-{job.pk}-deliveries"' not in other and "My mail" not in other
    box = member_client.get(f"/notify/jobs/{job.pk}/deliveries/")
    assert box.status_code == 200 and "My mail" in box.content.decode()
    assert admin_client.get(f"/notify/jobs/{job.pk}/deliveries/").status_code == 404


def test_push_subscribe_and_unsubscribe(member, member_client):
    sub = {"endpoint": "https://push.example.org/send/abc123", "keys": {"p256dh": "BPk", "auth": "au"}}
    answer = member_client.post(
        "/notify/push/subscribe/", json.dumps({"subscription": sub, "name": "Chrome on Linux"}),
        content_type="application/json",
    )  # fmt: skip
    assert answer.status_code == 200
    channel = Channel.objects.get(pk=answer.json()["channel"])
    assert (channel.kind, channel.name, channel.owner_id, channel.display) == (
        "browser", "Chrome on Linux", member.pk, "push.example.org"
    )  # fmt: skip
    # the same browser subscribing again replaces its channel
    member_client.post(
        "/notify/push/subscribe/", json.dumps({"subscription": sub}), content_type="application/json"
    )
    assert Channel.objects.filter(kind="browser").count() == 1
    answer = member_client.post(
        "/notify/push/unsubscribe/",
        json.dumps({"endpoint": sub["endpoint"]}),
        content_type="application/json",
    )
    assert answer.json() == {"removed": 1} and not Channel.objects.exists()


@pytest.mark.parametrize(
    "body", [b"not json", b"[]", b'{"subscription": {"endpoint": "ftp://x"}}', b"{" * 5000]
)
def test_a_bad_subscription_is_a_400(member_client, body):
    answer = member_client.post("/notify/push/subscribe/", body, content_type="application/json")
    assert answer.status_code == 400 and answer.json()["error"]


def test_the_vapid_key_is_made_once(member_client, settings, tmp_path):
    from notify import vapid

    settings.DATA_DIR = tmp_path
    settings.NOTIFY_VAPID_PRIVATE_KEY = ""
    first = member_client.get("/notify/push/key/").json()["publicKey"]
    assert (tmp_path / "vapid-private.key").stat().st_mode & 0o777 == 0o600
    assert member_client.get("/notify/push/key/").json()["publicKey"] == first
    assert first == vapid.public_key_for((tmp_path / "vapid-private.key").read_text().strip())
    assert len(vapid._b64url_decode(first)) == 65  # an uncompressed P-256 point


def test_the_service_worker_is_served_at_the_root(client):
    answer = client.get("/sw.js")
    assert answer.status_code == 200
    assert answer["Content-Type"].startswith("text/javascript")
    assert answer["Service-Worker-Allowed"] == "/"
    assert b"showNotification" in answer.content and b"notificationclick" in answer.content


def test_send_a_test_is_limited_per_channel_and_per_person(member, member_client, monkeypatch):
    """The test button can't be turned into a way to hammer a URL: a second test within the cooldown is
    refused with when to try again and sends nothing; past it one goes; a person's hour has a cap."""
    import datetime as dt

    from django.utils import timezone

    from notify import services

    channel = confirmed(channel_create(owner=member, kind="email", name="Mail", address="mia@example.org"))
    url = f"/notify/channels/{channel.pk}/test/"
    assert member_client.post(url).status_code == 302
    page = member_client.post(url, follow=True).content.decode()
    assert "moments ago: send another in" in page
    assert Delivery.objects.filter(channel=channel).count() == 1

    Delivery.objects.update(created=timezone.now() - services.TEST_COOLDOWN - dt.timedelta(seconds=1))
    member_client.post(url)
    assert Delivery.objects.filter(channel=channel).count() == 2

    monkeypatch.setattr(services, "TEST_PER_HOUR", 3)
    other = confirmed(channel_create(owner=member, kind="email", name="Other", address="mia2@example.org"))
    Delivery.objects.update(created=timezone.now() - dt.timedelta(minutes=10))
    member_client.post(f"/notify/channels/{other.pk}/test/")
    assert Delivery.objects.filter(event="test").count() == 3
    page = member_client.post(url, follow=True).content.decode()
    assert "3 tests within an hour: send another in 50 min." in page
    assert Delivery.objects.filter(event="test").count() == 3
