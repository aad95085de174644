"""Reconcile's sweeps (``jobs.queue.reconcile``), each on its own: given rows as a crash or a lost message left
them, which Celery work a sweep queues (seen at the one sending seam, ``jobs.queue.enqueue.send``), what it
frees, and what it leaves alone."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from devices.models import Device
from devices.services import device_register
from jobs.core import lease
from jobs.models import DeviceLease, DeviceUse, Job
from jobs.queue import enqueue, reconcile
from jobs.queue.stops import stop_pickup
from jobs.tests.ui_fixtures import hold_device, make_job

pytestmark = pytest.mark.django_db

LONG_AGO = dt.timedelta(minutes=5)


@pytest.fixture
def sent(monkeypatch):
    """The Celery work the sweeps queue, as (task name, arguments, options); nothing reaches a broker."""
    out: list[tuple[str, tuple, dict]] = []
    monkeypatch.setattr(enqueue, "send", lambda task, *args, **options: out.append((task, args, options)))
    return out


def _active() -> list[Job]:
    """The active jobs as reconcile reads them."""
    return reconcile._active_jobs()


def _other_device() -> Device:
    return device_register(name="Other", kind="tiiny", base_url="http://127.0.0.1:9", api_key="k")


def _leases() -> dict[int, DeviceLease]:
    return {row.device_id: row for row in DeviceLease.objects.all()}


def _lease(device, job=None, *, expires: dt.timedelta) -> None:
    """The device's lease held for ``job`` (None: a dispatcher's), running out ``expires`` from now."""
    assert lease.lease_acquire(device.pk, job.pk if job is not None else None)
    DeviceLease.objects.filter(pk=device.pk).update(expires_at=timezone.now() + expires)


# -- polls to revive -----------------------------------------------------------------------------------------------


def test_a_render_whose_poll_chain_went_quiet_is_polled_now(member, device, sent):
    job = make_job(member, device, state="running", remote_id="v1", poll_ticket=4)
    Job.objects.filter(pk=job.pk).update(next_poll_at=timezone.now() - LONG_AGO)

    assert reconcile.revive_polls(_active(), timezone.now()) == 1
    assert sent == [("poll_job", (job.pk, 5), {"countdown": 0})]  # from the ticket it held, moved on
    assert Job.objects.get(pk=job.pk).poll_ticket == 5


def test_a_poll_chain_that_is_only_due_or_a_job_outside_one_is_left_alone(member, device, sent):
    make_job(
        member, device, state="running", remote_id="v1", next_poll_at=timezone.now() - dt.timedelta(seconds=1)
    )
    make_job(member, device, state="submitted", remote_id="")  # no render yet: recovery's
    make_job(member, device, kind="image", state="running", remote_id="i1")  # a blocking call: no chain

    assert reconcile.revive_polls(_active(), timezone.now()) == 0
    assert sent == []


# -- jobs to recover -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lease_of", ["nobody", "lapsed", "another"])
def test_an_active_job_whose_lease_is_not_live_and_its_own_is_recovered(member, device, sent, lease_of):
    job = make_job(member, device, kind="image", state="running")
    if lease_of == "lapsed":
        _lease(device, job, expires=-LONG_AGO)
    elif lease_of == "another":
        _lease(device, make_job(member, device, state="done"), expires=LONG_AGO)

    assert reconcile.recover_orphans(_active(), _leases(), timezone.now()) == 1
    assert sent == [("recover_job", (job.pk,), {})]


def test_a_job_holding_its_live_lease_or_in_a_poll_chain_is_not_recovered(member, device, sent):
    job = make_job(member, device, kind="image", state="running")
    hold_device(device, job)
    make_job(
        member, _other_device(), state="running", remote_id="v1"
    )  # its poll chain watches it, not its lease

    assert reconcile.recover_orphans(_active(), _leases(), timezone.now()) == 0
    assert sent == []


# -- stops -----------------------------------------------------------------------------------------------------------


def _cancelled_render(member, device, *, expires: dt.timedelta) -> Job:
    job = make_job(member, device, state="cancelled", remote_id="v_stop")
    _lease(device, job, expires=expires)
    return job


def test_a_stop_that_never_arrived_is_sent_with_a_window_to_be_picked_up(member, device, sent):
    job = _cancelled_render(member, device, expires=-dt.timedelta(seconds=1))
    stopping = reconcile._stops_pending(_leases(), busy=set())
    assert stopping == {device.pk: job.pk}

    assert reconcile.resend_stops(stopping, _leases(), timezone.now()) == 1
    assert sent == [("cancel_on_device", (job.pk,), {})]
    expires = DeviceLease.objects.get(pk=device.pk).expires_at
    assert timezone.now() < expires <= timezone.now() + stop_pickup()


def test_a_stop_on_its_way_is_not_sent_again(member, device, sent):
    job = _cancelled_render(member, device, expires=LONG_AGO)
    assert reconcile.resend_stops({device.pk: job.pk}, _leases(), timezone.now()) == 0
    assert sent == []


def test_a_stop_the_broker_refuses_is_left_for_the_next_round(member, device, monkeypatch):
    job = _cancelled_render(member, device, expires=-dt.timedelta(seconds=1))

    def down(task, *args, **options):
        raise ConnectionError("the broker is down")

    monkeypatch.setattr(enqueue, "send", down)
    before = DeviceLease.objects.get(pk=device.pk).expires_at
    assert reconcile.resend_stops({device.pk: job.pk}, _leases(), timezone.now()) == 0
    assert DeviceLease.objects.get(pk=device.pk).expires_at == before  # still lapsed: the next round sends it


# -- stale leases --------------------------------------------------------------------------------------------------


def test_a_lapsed_lease_left_by_an_ended_job_is_freed_and_its_time_recorded(member, device):
    job = make_job(member, device, kind="image", state="done")
    _lease(device, job, expires=-dt.timedelta(seconds=1))

    assert reconcile.release_stale_leases(_leases(), busy=set(), now=timezone.now()) == 1
    row = DeviceLease.objects.get(pk=device.pk)
    assert row.job_id is None and row.expires_at is None
    use = DeviceUse.objects.get(job=job)
    assert use.ended == Job.objects.get(pk=job.pk).finished_at  # up to its end, not to now


def test_a_live_lease_or_one_of_a_busy_device_is_kept(member, device):
    job = make_job(member, device, kind="image", state="done")
    _lease(device, job, expires=LONG_AGO)
    assert reconcile.release_stale_leases(_leases(), busy=set(), now=timezone.now()) == 0

    DeviceLease.objects.filter(pk=device.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert reconcile.release_stale_leases(_leases(), busy={device.pk}, now=timezone.now()) == 0
    assert DeviceLease.objects.get(pk=device.pk).job_id == job.pk


# -- idle queues ---------------------------------------------------------------------------------------------------


def test_an_idle_queue_is_dispatched(member, device, sent):
    make_job(member, device)
    assert reconcile.start_idle_queues(_leases(), busy=set(), now=timezone.now()) == 1
    assert sent == [("dispatch", (device.pk,), {})]


@pytest.mark.parametrize("why", ["busy", "paused", "auth_failed", "leased"])
def test_a_queue_that_may_not_move_is_left_alone(member, device, sent, why):
    make_job(member, device)
    if why == "paused":
        Device.objects.filter(pk=device.pk).update(queue_paused=True)
    elif why == "auth_failed":
        Device.objects.filter(pk=device.pk).update(state="auth_failed")
    elif why == "leased":
        hold_device(device)  # a dispatcher (or a test) holds it

    busy = {device.pk} if why == "busy" else set()
    assert reconcile.start_idle_queues(_leases(), busy=busy, now=timezone.now()) == 0
    assert sent == []


def test_a_queue_waiting_for_a_device_away_has_the_poller_watch_it(member, device, sent):
    Device.objects.filter(pk=device.pk).update(state="locked", active_until=None)
    make_job(member, device)

    assert reconcile.start_idle_queues(_leases(), busy=set(), now=timezone.now()) == 0
    assert sent == []  # nothing to dispatch to: the poller notices it back
    watched = Device.objects.get(pk=device.pk).active_until
    assert watched > timezone.now() + dt.timedelta(minutes=20)

    reconcile.start_idle_queues(_leases(), busy=set(), now=timezone.now())
    assert (
        Device.objects.get(pk=device.pk).active_until == watched
    )  # already watched: not renewed every round


# -- the round -----------------------------------------------------------------------------------------------------


def test_a_round_runs_every_sweep_and_a_device_stopping_a_render_counts_as_busy(member, device, sent):
    _cancelled_render(member, device, expires=-dt.timedelta(seconds=1))
    make_job(member, device)  # waits behind the stop: not dispatched
    orphan = make_job(member, _other_device(), kind="image", state="running")

    counts = reconcile.reconcile()
    assert counts == {
        "polls": 0,
        "recovered": 1,
        "stops": 1,
        "released": 0,
        "lost": 0,
        "unlost": 0,
        "moved": 0,
        "chained": 0,
        "dispatched": 0,
    }
    assert [task for task, _args, _options in sent] == ["recover_job", "cancel_on_device"]
    assert sent[0][1] == (orphan.pk,)
