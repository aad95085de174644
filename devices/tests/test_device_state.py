"""Polling the emulator moves the device through every state, and records readings and capabilities."""

from __future__ import annotations

import pytest

from devices.emulator.testing import run_tiiny
from devices.models import Device, DeviceMetric
from devices.services import FIX_LOCKED, device_register, device_update
from devices.tasks import poll_device

pytestmark = pytest.mark.django_db


def test_it_goes_online_with_a_reading_and_capabilities(pocket):
    assert poll_device(pocket.pk) == Device.State.ONLINE
    pocket.refresh_from_db()
    assert pocket.state == Device.State.ONLINE
    assert pocket.last_seen is not None
    assert pocket.npu_mem_total_mb and pocket.cpu_percent is not None
    assert pocket.capabilities["kind"] == "tiiny"
    assert pocket.versions["tiiny_os"]
    assert DeviceMetric.objects.filter(device=pocket).count() == 2  # one 10 s and one 5 min bucket
    assert pocket.poll_claimed_until is None


def test_it_goes_locked_with_the_fix_after_a_power_cycle_and_back_after_unlock(pocket, tiiny):
    poll_device(pocket.pk)
    tiiny.power_cycle()
    assert poll_device(pocket.pk) == Device.State.LOCKED
    pocket.refresh_from_db()
    assert pocket.state_fix == FIX_LOCKED
    assert "tiiny login" in pocket.state_fix and "TiinyOS" in pocket.state_fix
    tiiny.unlock()
    assert poll_device(pocket.pk) == Device.State.ONLINE
    pocket.refresh_from_db()
    assert pocket.state_message == "" and pocket.state_fix == ""


def test_it_goes_auth_failed_with_a_wrong_key(pocket):
    device_update(device=pocket, api_key="wrong")
    assert poll_device(pocket.pk) == Device.State.AUTH_FAILED
    pocket.refresh_from_db()
    assert "API key" in pocket.state_message


def test_it_goes_unreachable_when_the_device_stops(db):
    with run_tiiny(speed=3000) as emu:
        device = device_register(name="Short-lived", kind="tiiny", base_url=emu.base_url, api_key=emu.api_key)
        assert poll_device(device.pk) == Device.State.ONLINE
        emu.stop()
        assert poll_device(device.pk) == Device.State.UNREACHABLE
    device.refresh_from_db()
    # The address is for admins only (state_detail), never in the message everyone sees.
    assert device.base_url not in device.state_message and device.base_url in device.state_detail


def test_it_polls_a_device_once_at_a_time(pocket):
    from django.utils import timezone

    from devices.services import device_claim_poll

    assert device_claim_poll(device_id=pocket.pk, now=timezone.now())
    assert poll_device(pocket.pk) is None  # claimed by "another worker": no device request
    pocket.refresh_from_db()
    assert pocket.reading_at is None


def test_it_reads_tensorsharp_capabilities_and_state(db):
    from devices.emulator.testing import run_tensorsharp

    with run_tensorsharp(speed=3000, model="minimax-h3") as ts:
        device = device_register(name="GPU box", kind="tensorsharp", base_url=ts.base_url)
        assert poll_device(device.pk) == Device.State.ONLINE
        device.refresh_from_db()
        caps = device.capabilities
        assert caps["kind"] == "tensorsharp"
        assert caps["tensorsharp"]["video"]["family"] == "minimax-h3"
        assert caps["tensorsharp"]["architecture"]
        assert caps["tensorsharp"]["frame_grid"] == "17k+5"
        ts.stop()
        assert poll_device(device.pk) == Device.State.UNREACHABLE
