"""The Private hosts page (admins): a host allowed there is reachable by every channel; removed, it is blocked
again at the next send. Everyone else gets 403, as on the household page."""

from __future__ import annotations

import socket

import pytest

from notify import targets
from notify.models import PrivateHost
from notify.services import channel_create, channel_test, delivery_attempt

pytestmark = pytest.mark.django_db
PAGE = "/notify/private-hosts/"


@pytest.fixture
def names(monkeypatch):
    def resolve(host: str, port: int) -> list[str]:
        if host != "ha.test":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return ["127.0.0.1"]

    monkeypatch.setattr(targets, "resolve", resolve)


def test_only_admins_see_or_change_the_page(client, member_client, viewer_client, admin_client):
    row = PrivateHost.objects.create(host="ha.test", port=8123)
    for door in (member_client, viewer_client):
        assert door.get(PAGE).status_code == 403
        assert door.post(PAGE, {"host": "nas.test"}).status_code == 403
        assert door.post(f"/notify/private-hosts/{row.pk}/delete/").status_code == 403
    assert client.get(PAGE).status_code == 302  # to the sign-in page
    assert list(PrivateHost.objects.values_list("host", flat=True)) == ["ha.test"]
    page = admin_client.get(PAGE).content.decode()
    assert "ha.test:8123" in page and 'id="private-host-form"' in page
    assert 'id="notify-private-hosts-link"' in admin_client.get("/notify/household/").content.decode()


def test_a_host_allowed_on_the_page_is_reached_by_every_channel_until_removed(
    admin_client, member, receiver, names
):
    r = receiver([200])
    port = r.server.server_address[1]
    url = f"http://ha.test:{port}/api/webhook/lights"
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        channel_create(owner=member, kind="webhook", name="HA", url=url)

    answer = admin_client.post(PAGE, {"host": f"HA.test:{port}"})
    assert answer.status_code == 302
    (row,) = PrivateHost.objects.all()
    assert (row.host, row.port) == ("ha.test", port)
    channel = channel_create(owner=member, kind="webhook", name="HA", url=url)
    assert delivery_attempt(delivery_id=channel_test(channel=channel).pk) == "sent"
    assert len(r.wait(1)) == 1

    assert admin_client.post(f"/notify/private-hosts/{row.pk}/delete/").status_code == 302
    assert not PrivateHost.objects.exists()
    channel.deliveries.update(created=channel.created.replace(year=2000))  # past the test's cooldown
    delivery = channel_test(channel=channel)
    assert delivery_attempt(delivery_id=delivery.pk) == "failed"
    delivery.refresh_from_db()
    assert delivery.reason == targets.BLOCKED
    assert r.connections == 1


@pytest.mark.parametrize("text", ["http://ha.test/", "ha.test:99999", "user@ha.test", "a b"])
def test_what_is_not_a_host_is_refused_on_the_form(admin_client, text):
    answer = admin_client.post(PAGE, {"host": text})
    assert answer.status_code == 400
    assert 'id="private-host-error"' in answer.content.decode()
    assert not PrivateHost.objects.exists()


def test_the_settings_hosts_are_listed_as_such(admin_client, settings):
    settings.HUB_NOTIFY_PRIVATE_HOSTS = ["nas.lan:8080"]
    page = admin_client.get(PAGE).content.decode()
    assert "nas.lan:8080" in page and "HUB_NOTIFY_PRIVATE_HOSTS" in page


def test_an_ipv6_host_with_a_port_is_shown_bracketed(db):
    assert (
        str(PrivateHost(host="fd00::5", port=8123)) == "[fd00::5]:8123"
    )  # not fd00::5:8123, another address
    assert str(PrivateHost(host="fd00::5")) == "fd00::5"
    assert str(PrivateHost(host="ha.lan", port=8123)) == "ha.lan:8123"
