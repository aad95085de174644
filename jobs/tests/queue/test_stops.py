"""The stop of a cancelled render: a lost stop message is sent again within a few reconcile rounds (not after
the job's whole lease TTL, with the device rendering a cancelled job meanwhile), and a stop delivered twice
makes one stop on the device, never two at once."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from jobs.core import lease
from jobs.models import DeviceLease
from jobs.queue import engine
from jobs.queue.dispatch import dispatch_device
from jobs.queue.reconcile import reconcile
from jobs.queue.services import job_cancel
from jobs.queue.stops import stop_pickup
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch):
    """Stops sent to a queue that keeps nothing: the message is lost, as when Redis restarts empty."""
    from jobs.queue import enqueue

    calls: list[int] = []
    send = enqueue.send

    def lost(task, *args, **options):
        if task != "cancel_on_device":
            return send(task, *args, **options)
        calls.append(args[0])

    monkeypatch.setattr(enqueue, "send", lost)
    return calls


def _cancelled_render(member, device, django_capture_on_commit_callbacks):
    job = make_job(member, device, state="running", remote_id="video_lost_stop_1")
    assert lease.lease_acquire(device.pk, job.pk)  # the poll chain's lease: a whole TTL ahead
    with django_capture_on_commit_callbacks(execute=True):
        job_cancel(job=job, by=member)
    return job


def test_a_lost_stop_is_sent_again_after_the_pickup_window_not_the_lease_ttl(
    member, device, sent, django_capture_on_commit_callbacks
):
    job = _cancelled_render(member, device, django_capture_on_commit_callbacks)
    assert sent == [job.pk]
    now = timezone.now()
    pickup = stop_pickup()
    assert pickup < lease.ttl()
    assert dispatch_device(device.pk) is None  # the device stays shut while the stop is on its way

    expires = DeviceLease.objects.get(pk=device.pk).expires_at
    assert now < expires <= now + pickup + dt.timedelta(seconds=1)  # not the poll chain's TTL
    reconcile()
    assert sent == [job.pk]  # still within its window: not sent twice

    DeviceLease.objects.filter(pk=device.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    reconcile()  # the window passed and nobody claimed it
    assert sent == [job.pk, job.pk]  # sent again, long before the TTL
    reconcile()
    assert sent == [job.pk, job.pk]  # and given a new window
    assert dispatch_device(device.pk) is None


def test_a_stop_delivered_twice_stops_the_device_once(
    member, device, sent, django_capture_on_commit_callbacks, monkeypatch
):
    job = _cancelled_render(member, device, django_capture_on_commit_callbacks)
    assert lease.lease_claim_stop(device.pk, job.pk)  # the first delivery is stopping it right now
    stops: list[int] = []
    monkeypatch.setattr(engine, "runner_for", lambda j: stops.append(j.pk))
    engine.cancel_on_device(job.pk)  # the second delivery
    assert stops == []
    row = DeviceLease.objects.get(pk=device.pk)
    assert row.job_id == job.pk and row.token.startswith(lease.STOPPING)

    # The first stopper died mid-stop: its claim lapses, and the next delivery takes it over.
    DeviceLease.objects.filter(pk=device.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    reconcile()
    assert sent == [job.pk, job.pk]
    assert lease.lease_claim_stop(device.pk, job.pk)


@pytest.mark.parametrize("away", ["unreachable", "locked"])
def test_a_job_waiting_for_a_device_the_poller_found_away_has_it_polled_fast(member, device, away):
    """The poller noticed the device was gone before any job tried it: the queued job must still have it looked
    at every beat, or a device back from a power cut waited for the slow rhythm (30 s) before its queue moved."""
    from devices.models import Device
    from devices.services import POLL_FAST, device_poll_interval

    Device.objects.filter(pk=device.pk).update(state=away, active_until=None)
    make_job(member, device)
    reconcile()
    now = timezone.now()
    device.refresh_from_db()
    assert device_poll_interval(device=device, watched=False, now=now) == POLL_FAST
    assert device.active_until > now + dt.timedelta(minutes=20)

    # Once its queue is empty, the poller goes back to its own rhythm when that window ends (nothing renews it).
    Device.objects.filter(pk=device.pk).update(active_until=now - dt.timedelta(seconds=1))
    from jobs.models import Job

    Job.objects.filter(device=device).update(state="cancelled")
    reconcile()
    device.refresh_from_db()
    assert device.active_until < timezone.now()
