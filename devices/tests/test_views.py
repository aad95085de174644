"""Every device page: who may see it, what it shows, and that the key never appears anywhere."""

from __future__ import annotations

import logging

import pytest
from django.urls import reverse

from devices.models import Device
from devices.services import device_register
from devices.tasks import poll_device

pytestmark = pytest.mark.django_db
KEY = "9d1c4e77-5b2a-4c0e-8f3d-feedfacecafe"


@pytest.fixture
def device():
    return device_register(name="Pocket", kind="tiiny", base_url="http://192.0.2.10", api_key=KEY)


def test_it_lists_devices_for_everyone_signed_in(client, viewer_client, member_client, admin_client, device):
    assert client.get(reverse("devices-list")).status_code == 302  # to the login page
    for c in (viewer_client, member_client):
        page = c.get(reverse("devices-list")).content.decode()
        assert f'id="device-{device.pk}-card"' in page
        assert "192.0.2.10" not in page and "Add a device" not in page
    assert "Add a device" in admin_client.get(reverse("devices-list")).content.decode()


def test_it_shows_the_detail_page_with_gauges_and_the_live_socket(viewer_client, device):
    page = viewer_client.get(reverse("devices-detail", args=[device.pk])).content.decode()
    assert f'id="device-{device.pk}-gauges"' in page
    assert f'ws-connect="/ws/hub/?watch=device:{device.pk}"' in page
    assert "uPlot.iife.min.js" in page
    assert "192.0.2.10" not in page and "Test connection" not in page
    assert viewer_client.get(reverse("devices-detail", args=[999])).status_code == 404


def test_it_shows_the_url_and_key_status_to_admins_only(admin_client, device):
    page = admin_client.get(reverse("devices-detail", args=[device.pk])).content.decode()
    assert "192.0.2.10" in page and "Test connection" in page
    assert ">set<" in page


def test_it_shows_state_message_fix_and_loaded_models(pocket, tiiny, member_client):
    tiiny.load("Tongyi-MAI/Z-Image-Turbo")
    poll_device(pocket.pk)
    page = member_client.get(reverse("devices-detail", args=[pocket.pk])).content.decode()
    assert "Z-Image-Turbo" in page and "32.0% NPU" in page
    assert "<meter" in page
    tiiny.power_cycle()
    poll_device(pocket.pk)
    page = member_client.get(reverse("devices-list")).content.decode()
    assert "Locked" in page and "tiiny login" in page


def test_it_serves_chart_data_to_signed_in_people(viewer_client, client, pocket):
    poll_device(pocket.pk)
    data = viewer_client.get(reverse("devices-metrics", args=[pocket.pk]) + "?range=hour").json()
    assert len(data["t"]) == 1 and set(data) >= {"npu_util", "npu_mem", "cpu", "mem"}
    assert client.get(reverse("devices-metrics", args=[pocket.pk])).status_code == 302


@pytest.mark.parametrize("name", ["devices-add", "devices-find"])
def test_it_keeps_admin_pages_from_members_and_viewers(member_client, viewer_client, admin_client, name):
    for c in (member_client, viewer_client):
        assert c.get(reverse(name)).status_code == 403
    assert admin_client.get(reverse(name)).status_code == 200


def test_it_keeps_edit_and_test_from_members(member_client, device):
    assert member_client.get(reverse("devices-edit", args=[device.pk])).status_code == 403
    assert member_client.post(reverse("devices-edit", args=[device.pk]), {"name": "x"}).status_code == 403
    assert member_client.post(reverse("devices-test", args=[device.pk])).status_code == 403
    assert member_client.post(reverse("devices-add-test"), {"kind": "tiiny"}).status_code == 403


def test_it_adds_a_device_and_tests_it(admin_client, tiiny):
    resp = admin_client.post(
        reverse("devices-add"),
        {
            "name": "New",
            "kind": "tiiny",
            "base_url": tiiny.base_url,
            "api_key": tiiny.api_key,
            "night_start": "23:00",
            "night_end": "07:00",
            "time_zone": "",
        },
    )
    device = Device.objects.get(name="New")
    assert resp.status_code == 302 and resp["Location"] == reverse("devices-detail", args=[device.pk])
    assert device.state == Device.State.ONLINE and device.api_key == tiiny.api_key


def test_it_rejects_a_url_with_credentials_or_a_bad_scheme(admin_client):
    for url in ("http://u:p@10.0.0.1", "file:///etc/passwd", "gopher://x"):
        resp = admin_client.post(
            reverse("devices-add"),
            {"name": "Bad", "kind": "tiiny", "base_url": url, "night_start": "23:00", "night_end": "07:00"},
        )
        assert resp.status_code == 400  # the form again, with the message
        assert not Device.objects.exists()


def test_it_keeps_the_stored_key_when_the_edit_leaves_it_empty(admin_client, device):
    form = admin_client.get(reverse("devices-edit", args=[device.pk])).content.decode()
    assert KEY not in form and KEY[-4:] not in form
    resp = admin_client.post(
        reverse("devices-edit", args=[device.pk]),
        {
            "name": "Renamed",
            "kind": "tiiny",
            "base_url": "http://192.0.2.11",
            "api_key": "",
            "night_start": "22:00",
            "night_end": "06:00",
            "time_zone": "Europe/Paris",
        },
    )
    assert resp.status_code == 302
    device.refresh_from_db()
    assert device.name == "Renamed" and device.api_key == KEY and device.time_zone == "Europe/Paris"
    assert device.state == Device.State.UNKNOWN


def test_it_lets_admins_allow_renders_to_unload_the_summary_model(admin_client, device):
    vault = {"summary_start_hour": 23, "summary_end_hour": 5, "summary_model": "Qwen/Qwen3.6-35B-A3B-turbo"}
    Device.objects.filter(pk=device.pk).update(capabilities={"kind": "tiiny", "vault": vault})
    url = reverse("devices-edit", args=[device.pk])
    form = admin_client.get(url).content.decode()
    assert "At night TiinyOS writes memory summaries with Qwen/Qwen3.6-35B-A3B-turbo" in form
    assert "may_evict_summary_model" not in admin_client.get(reverse("devices-add")).content.decode()
    fields = {"name": "Pocket", "kind": "tiiny", "base_url": "http://192.0.2.10", "night_start": "23:00"}
    fields |= {"night_end": "07:00", "may_evict_summary_model": "on"}
    assert admin_client.post(url, fields).status_code == 302
    device.refresh_from_db()
    assert device.may_evict_summary_model
    del fields["may_evict_summary_model"]
    admin_client.post(url, fields)
    device.refresh_from_db()
    assert not device.may_evict_summary_model


def test_it_shows_exactly_what_failed_in_a_connection_test(admin_client, tiiny):
    resp = admin_client.post(
        reverse("devices-add-test"), {"kind": "tiiny", "base_url": tiiny.base_url, "api_key": "wrong"}
    )
    page = resp.content.decode()
    assert "Failed" in page and "rejected the API key" in page and "Not authenticated" in page
    ok = admin_client.post(
        reverse("devices-add-test"), {"kind": "tiiny", "base_url": tiiny.base_url, "api_key": tiiny.api_key}
    ).content.decode()
    assert "Connected" in ok


def test_it_tests_a_saved_device_and_records_its_state(admin_client, pocket, tiiny):
    tiiny.power_cycle()
    page = admin_client.post(reverse("devices-test", args=[pocket.pk])).content.decode()
    assert "locked" in page.lower() and "tiiny login" in page
    pocket.refresh_from_db()
    assert pocket.state == Device.State.LOCKED


def test_it_finds_devices_on_the_network(admin_client, tiiny, settings):
    settings.HUB_DISCOVERY_TARGETS = [f"127.0.0.1:{tiiny.udp_port}"]
    page = admin_client.post(reverse("devices-find")).content.decode()
    assert "TNY" in page and "Add…" in page and "172.17.7.177" in page


def test_it_never_shows_the_key_in_any_page_admin_page_or_log_line(
    admin_client, member_client, pocket, tiiny, caplog
):
    caplog.set_level(logging.DEBUG)
    from devices.services import device_update

    poll_device(pocket.pk)  # a good poll (readings, capabilities) ...
    key = "f00dbabe-1234-4321-abcd-0123456789ab"
    device_update(device=pocket, api_key=key)  # ... then a key the emulator rejects: the error paths too
    poll_device(pocket.pk)
    admin_client.post(reverse("devices-test", args=[pocket.pk]))
    urls = [
        reverse("devices-list"),
        reverse("devices-detail", args=[pocket.pk]),
        reverse("devices-edit", args=[pocket.pk]),
        reverse("devices-metrics", args=[pocket.pk]),
        reverse("admin:devices_device_changelist"),
        reverse("admin:devices_device_change", args=[pocket.pk]),
        reverse("admin:devices_device_add"),
    ]
    pages = [admin_client.get(u) for u in urls] + [member_client.get(urls[0]), member_client.get(urls[1])]
    assert all(p.status_code == 200 for p in pages)
    encrypted = Device.objects.get(pk=pocket.pk).api_key_encrypted
    for p in pages:
        body = p.content.decode()
        assert key not in body and encrypted not in body and key[-4:] not in body
    assert key not in caplog.text and encrypted not in caplog.text


def test_it_saves_a_new_key_through_the_admin_without_showing_it(admin_client, device):
    url = reverse("admin:devices_device_change", args=[device.pk])
    resp = admin_client.post(
        url,
        {
            "name": "Pocket",
            "kind": "tiiny",
            "base_url": "http://192.0.2.10",
            "new_api_key": "new-secret-key",
            "night_start": "23:00",
            "night_end": "07:00",
            "time_zone": "UTC",
        },
    )
    assert resp.status_code == 302
    device.refresh_from_db()
    assert device.api_key == "new-secret-key"
    assert "new-secret-key" not in admin_client.get(url).content.decode()
