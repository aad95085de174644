"""The device-state message is for everyone who watches the device; its address is for admins only."""

from __future__ import annotations

from importlib import import_module

import pytest
from django.apps import apps

from devices.live import device_topic
from devices.models import Device
from devices.services import FIX_UNREACHABLE, device_refresh, device_register

pytestmark = pytest.mark.django_db

ADDRESS = "127.0.0.1:9"  # the discard port: nothing listens, so every call is refused at once


@pytest.fixture
def gone(db) -> Device:
    """A device the hub can't reach, as a real poll leaves it."""
    device = device_register(name="Attic", kind="tiiny", base_url=f"http://{ADDRESS}", api_key="k")
    assert device_refresh(device_id=device.pk) == Device.State.UNREACHABLE
    device.refresh_from_db()
    return device


def test_it_keeps_the_address_out_of_the_message_and_in_the_admins_detail(gone):
    assert gone.state_message == "The device cannot be reached."
    assert gone.state_fix == FIX_UNREACHABLE
    assert ADDRESS not in gone.state_message + gone.state_fix
    assert gone.state_detail == f"Address: http://{ADDRESS}"


def test_a_device_that_is_fine_has_no_detail(gone):
    Device.objects.filter(pk=gone.pk).update(state=Device.State.ONLINE, state_message="", state_fix="")
    gone.refresh_from_db()
    assert gone.state_detail == ""


@pytest.mark.parametrize("who", ["viewer_client", "member_client"])
@pytest.mark.parametrize("page", ["/", "/devices/", "/devices/{pk}/"])
def test_members_and_viewers_see_cant_be_reached_with_the_advice_and_no_address(gone, request, who, page):
    content = request.getfixturevalue(who).get(page.format(pk=gone.pk)).content.decode()
    assert "The device cannot be reached." in content
    assert FIX_UNREACHABLE in content.replace("&#x27;", "'")
    assert ADDRESS not in content
    assert 'class="device-detail' not in content


@pytest.mark.parametrize("page", ["/", "/devices/", "/devices/{pk}/"])
def test_admins_also_see_the_address_beside_the_message(gone, admin_client, page):
    content = admin_client.get(page.format(pk=gone.pk)).content.decode()
    assert "The device cannot be reached." in content
    assert f'<p class="device-detail muted">Address: http://{ADDRESS}' in content


def test_the_device_topic_snapshot_carries_the_address_for_admins_only(gone, viewer, member, admin_user):
    for person in (viewer, member):
        _, snapshot = device_topic(person, str(gone.pk))
        assert "cannot be reached" in snapshot[0] and ADDRESS not in "".join(snapshot)
    _, snapshot = device_topic(admin_user, str(gone.pk))
    assert f"Address: http://{ADDRESS}" in snapshot[0]


def test_the_migration_strips_addresses_from_stored_messages(gone):
    Device.objects.filter(pk=gone.pk).update(
        state_message=f"The device cannot be reached. (http://{ADDRESS})"
    )
    import_module("devices.migrations.0003_state_message_without_address").strip_addresses(apps, None)
    gone.refresh_from_db()
    assert gone.state_message == "The device cannot be reached."
