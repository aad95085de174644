"""Who may have which channel (notify.selectors.channel_refusal): viewers watch, through their browser and by
email to their own address; webhooks and Apprise are for members and admins. Every door: the page, /api/notify,
the test button, and each delivery."""

from __future__ import annotations

import json

import pytest

from hub.accounts.services import user_create_or_update
from notify.models import Channel, Delivery
from notify.selectors import VIEWER_KIND_REFUSED
from notify.services import channel_create, delivery_attempt

pytestmark = pytest.mark.django_db
HOOK = "https://hooks.example.org/in/tok-kinds-77aa"
API = "/api/notify/channels"


@pytest.fixture
def vic(viewer):
    viewer.email = "vic@example.org"
    viewer.save(update_fields=["email"])
    return viewer


def _api(client, method: str, path: str, body=None):
    return client.generic(method, path, json.dumps(body or {}), content_type="application/json")


def test_the_page_offers_a_viewer_email_to_their_own_address_only(vic, viewer_client, settings):
    settings.HUB_PUBLIC_URL = "https://hub.example.lan"
    form = viewer_client.get("/notify/").context["form"]
    assert [k for k, _ in form.fields["kind"].choices] == ["email"]
    assert "url" not in form.fields and form.fields["address"].initial == "vic@example.org"

    hook = viewer_client.post("/notify/channels/add/", {"kind": "webhook", "url": HOOK, "name": "Hook"})
    assert hook.status_code == 400 and "Not a kind of channel" in hook.content.decode()
    other = viewer_client.post("/notify/channels/add/", {"kind": "email", "address": "boss@example.org"})
    assert other.status_code == 400
    assert "Viewers can have email sent to their own address only (vic@example.org" in other.content.decode()
    assert not Channel.objects.exists()

    own = viewer_client.post("/notify/channels/add/", {"kind": "email", "address": "VIC@example.org"})
    assert own.status_code == 302
    channel = Channel.objects.get()
    assert channel.awaits_confirmation  # their own address is confirmed like any other

    moved = viewer_client.post(
        f"/notify/channels/{channel.pk}/", {"name": "Mail", "address": "boss@example.org"}
    )
    assert moved.status_code == 400 and "their own address only" in moved.content.decode()
    channel.refresh_from_db()
    assert channel.address == "VIC@example.org"


@pytest.mark.parametrize(
    "body",
    [
        {"kind": "webhook", "url": HOOK},
        {"kind": "apprise", "url": "ntfy://kinds-topic-42"},
        {"kind": "email", "address": "boss@example.org"},
    ],
)
def test_the_api_refuses_a_viewer_with_a_403(vic, viewer_client, body):
    answer = _api(viewer_client, "POST", API, body)  # a session: viewers hold no token that may change things
    assert answer.status_code == 403, answer.content
    detail = answer.json()["detail"]
    assert detail == VIEWER_KIND_REFUSED or detail.startswith("Viewers can have email sent to their own")
    assert not Channel.objects.exists()


def test_a_webhook_kept_from_before_a_demotion_sends_nothing(member, member_client):
    hook = channel_create(owner=member, kind="webhook", name="Hook", url=HOOK)
    user_create_or_update(username=member.username, role="viewer")

    page = member_client.post(f"/notify/channels/{hook.pk}/test/", follow=True).content.decode()
    assert "“Hook” sends nothing: Viewers can have notifications in their browser" in page
    answer = _api(member_client, "POST", f"{API}/{hook.pk}/test")
    assert answer.status_code == 403 and answer.json()["detail"].startswith("“Hook” sends nothing")
    assert not Delivery.objects.exists()

    # news of an old job still finds the channel; the delivery fails with the reason, and nothing is called
    delivery = Delivery.objects.create(channel=hook, event="job.done", key="job.done:1:1")
    assert delivery_attempt(delivery_id=delivery.pk) == "failed"
    delivery.refresh_from_db()
    assert delivery.reason == f"not sent: {VIEWER_KIND_REFUSED}"


def test_members_may_add_every_kind(member_client):
    answer = member_client.post("/notify/channels/add/", {"kind": "webhook", "url": HOOK, "name": "Hook"})
    assert answer.status_code == 302 and Channel.objects.get().kind == "webhook"
