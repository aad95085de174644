"""poll_all: who is due, at which rate, and that browsers watching never add device requests."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from devices import tasks
from devices.models import Device
from devices.services import device_mark_active
from hub import live

pytestmark = pytest.mark.django_db


@pytest.fixture
def enqueued(monkeypatch):
    sent: list[int] = []
    monkeypatch.setattr(tasks.poll_device, "apply_async", lambda args, **kw: sent.append(args[0]))
    return sent


@pytest.fixture
def device():
    from django.core.cache import cache

    d = Device.objects.create(name="d", kind="tiiny", base_url="http://x")
    cache.delete(live.watch_key(f"device:{d.pk}"))
    return d


def test_it_polls_a_new_device_then_waits_30_seconds(device, enqueued):
    assert tasks.poll_all() == 1
    assert tasks.poll_all() == 0  # the next beat two seconds later: not due
    device.refresh_from_db()
    assert 28 <= (device.next_poll_at - timezone.now()).total_seconds() <= 30
    assert enqueued == [device.pk]


def test_it_polls_every_2_seconds_while_watched_however_many_watch(device, enqueued):
    tasks.poll_all()
    for _ in range(5):  # five browsers announce themselves
        live.mark_watched(f"device:{device.pk}")
    assert tasks.poll_all() == 1  # on the slow schedule, but watched now: due at once, once
    assert tasks.poll_all() == 0
    device.refresh_from_db()
    assert (device.next_poll_at - timezone.now()).total_seconds() <= 2


def test_it_polls_fast_while_a_job_runs(device, enqueued):
    device_mark_active(device_id=device.pk, until=timezone.now() + dt.timedelta(minutes=5))
    assert tasks.poll_all() == 1
    device.refresh_from_db()
    assert (device.next_poll_at - timezone.now()).total_seconds() <= 2


def test_it_pushes_the_card_and_gauges_after_a_poll(pocket, monkeypatch):
    pushed: list[tuple[str, str]] = []
    audiences: list[tuple[str, tuple, tuple]] = []

    def push(group, html, **kw):
        pushed.append((group, html))
        audiences.append((group, tuple(kw.get("audience") or ()), tuple(kw.get("exclude") or ())))

    monkeypatch.setattr(live, "push", push)
    live.mark_watched(f"device:{pocket.pk}")  # a dashboard or the device page (card and gauges)
    live.mark_watched(f"card:{pocket.pk}")  # the device list (the card alone)
    tasks.poll_device(pocket.pk)
    groups = [g for g, _ in pushed]
    assert groups.count(f"card.{pocket.pk}") == 1  # the card alone
    # The device page: the card, and the gauges in two versions (admins' carry the NPU budget units).
    assert groups.count(f"device.{pocket.pk}") == 3
    gauges = [
        (a, e)
        for (g, a, e), (_, h) in zip(audiences, pushed, strict=True)
        if g == f"device.{pocket.pk}" and f'id="device-{pocket.pk}-card"' not in h
    ]
    assert sorted(gauges) == sorted([((), (live.ADMINS,)), ((live.ADMINS,), ())])
    card = next(h for g, h in pushed if g == f"card.{pocket.pk}")
    assert f'id="device-{pocket.pk}-card"' in card and 'hx-swap-oob="true"' in card and "Online" in card
    assert pocket.base_url not in "".join(h for _, h in pushed)
