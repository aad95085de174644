"""The two hooks: a job's transition (jobs.core.transitions, after commit) and a device becoming locked
(devices.services.device_set_state). A failing channel never touches the job, its result or the queue."""

from __future__ import annotations

import pytest

from jobs.core.transitions import job_transition
from jobs.models import Job
from jobs.tests.ui_fixtures import make_job
from notify.models import Delivery
from notify.services import channel_create, delivery_attempt

pytestmark = pytest.mark.django_db


def _hook(owner, url="https://hooks.invalid/x", **events):
    return channel_create(owner=owner, kind="webhook", name="hook", url=url, **events)


def _finish(job, to="done", **fields):
    assert job_transition(job.pk, from_states=["running"], to=to, message=f"now {to}", **fields)


def test_a_finished_job_makes_one_delivery_per_wanting_channel(
    member, other_member, device, django_capture_on_commit_callbacks
):
    mine = _hook(member)
    _hook(member, on_done=False)  # does not want "done"
    _hook(other_member)  # someone else's
    job = make_job(member, device, state="running")

    with django_capture_on_commit_callbacks(execute=True):
        _finish(job)

    (delivery,) = Delivery.objects.all()
    assert (delivery.channel_id, delivery.job_id, delivery.event, delivery.attempt) == (
        mine.pk,
        job.pk,
        "job.done",
        1,
    )
    assert delivery.status == "pending"


def test_only_channels_turned_on_with_the_events_flag_get_a_delivery(
    member, device, django_capture_on_commit_callbacks
):
    from notify.models import Channel

    on = _hook(member)
    off = _hook(member)
    Channel.objects.filter(pk=off.pk).update(enabled=False)
    _hook(member, on_done=False)
    assert list(Channel.objects.filter(Channel.wanting("job.done")).values_list("pk", flat=True)) == [on.pk]
    job = make_job(member, device, state="running")
    with django_capture_on_commit_callbacks(execute=True):
        _finish(job)
    assert list(Delivery.objects.values_list("channel_id", flat=True)) == [on.pk]


def test_started_is_opt_in(member, device, django_capture_on_commit_callbacks):
    quiet, loud = _hook(member), _hook(member, on_started=True)
    job = make_job(member, device, state="queued")
    with django_capture_on_commit_callbacks(execute=True):
        assert job_transition(job.pk, from_states=["queued"], to="preparing", message="loading")
    assert list(Delivery.objects.values_list("channel_id", "event")) == [(loud.pk, "job.started")]
    assert quiet.pk != loud.pk


def test_failed_jobs_are_told_with_the_reason(member, device, django_capture_on_commit_callbacks):
    _hook(member)
    job = make_job(member, device, state="running")
    with django_capture_on_commit_callbacks(execute=True):
        _finish(job, "failed", error_human="The device ran out of memory.")
    delivery = Delivery.objects.get()
    from notify.services import build_message

    message = build_message(delivery)
    assert delivery.event == "job.failed"
    assert message.body == "The device ran out of memory."
    assert message.path == f"/jobs/{job.pk}/" and message.data["job"]["state"] == "failed"


def test_a_messages_link_is_the_hubs_own_address_https_included(
    member, device, settings, django_capture_on_commit_callbacks
):
    """hub.links' rule, as every link the hub hands out: HUB_PUBLIC_URL, else where it serves, https when so."""
    from notify.services import build_message

    _hook(member)
    job = make_job(member, device, state="running")
    with django_capture_on_commit_callbacks(execute=True):
        _finish(job, "failed", error_human="The device ran out of memory.")
    delivery = Delivery.objects.get()
    settings.HUB_PUBLIC_URL, settings.HUB_HOST, settings.HUB_PORT, settings.HUB_HTTPS = (
        "",
        "hub.lan",
        443,
        True,
    )
    assert build_message(delivery).url == f"https://hub.lan/jobs/{job.pk}/"
    settings.HUB_PUBLIC_URL = "https://hub.example.lan"
    assert build_message(delivery).url == f"https://hub.example.lan/jobs/{job.pk}/"


def test_a_rolled_back_transition_notifies_nobody(member, device, django_capture_on_commit_callbacks):
    from django.db import transaction

    _hook(member)
    job = make_job(member, device, state="running")
    with django_capture_on_commit_callbacks(execute=True):
        try:
            with transaction.atomic():
                _finish(job)
                raise RuntimeError("the caller's transaction fails after the transition")
        except RuntimeError:
            pass
    assert not Delivery.objects.exists()
    assert Job.objects.get(pk=job.pk).state == "running"


def test_a_failing_channel_never_touches_the_job_or_the_queue(
    member, device, django_capture_on_commit_callbacks, fast_retries, allow_loopback
):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/"
    _hook(member, url=dead)
    first = make_job(member, device, state="running")
    second = make_job(member, device, state="queued")

    with django_capture_on_commit_callbacks(execute=True):
        _finish(first, progress=100.0)
    # the queue moves on while the first job's delivery has not even been tried
    with django_capture_on_commit_callbacks(execute=True):
        assert job_transition(second.pk, from_states=["queued"], to="preparing", message="next")

    delivery = Delivery.objects.get(job=first)
    assert delivery_attempt(delivery_id=delivery.pk) == "retrying"
    first.refresh_from_db()
    assert first.state == "done" and first.progress == 100.0
    assert Job.objects.get(pk=second.pk).state == "preparing"


def test_a_hook_run_twice_makes_no_second_delivery(member, device):
    from notify.job_news import job_entered

    _hook(member)
    job = make_job(member, device, state="running")
    _finish(job)  # its notice; the hand-over after the commit is played below, twice
    seq = Job.objects.get(pk=job.pk).last_seq
    job_entered(job_id=job.pk, state="done", seq=seq)
    job_entered(job_id=job.pk, state="done", seq=seq)
    assert Delivery.objects.count() == 1


def test_the_queue_empty_event_comes_with_the_last_job(
    admin_user, member, device, django_capture_on_commit_callbacks
):
    house = channel_create(
        owner=None, kind="webhook", name="house", url="https://h.invalid/", on_queue_empty=True
    )
    first = make_job(member, device, state="running")
    make_job(member, device, state="queued")
    with django_capture_on_commit_callbacks(execute=True):
        _finish(first)
    assert not Delivery.objects.filter(event="queue.empty").exists()  # one still waits

    Job.objects.filter(state="queued").update(state="running")
    last = Job.objects.get(state="running")
    with django_capture_on_commit_callbacks(execute=True):
        _finish(last, "cancelled")
    (empty,) = Delivery.objects.filter(event="queue.empty")
    assert (empty.channel_id, empty.device_id) == (house.pk, device.pk)
    # household channels get household events only: never a person's job (its prompt may be private)
    assert not Delivery.objects.filter(channel=house, event__startswith="job.").exists()


def test_a_device_that_becomes_locked_tells_the_household_once(device, django_capture_on_commit_callbacks):
    from devices.models import Device
    from devices.services import device_set_state

    house = channel_create(
        owner=None, kind="webhook", name="house", url="https://h.invalid/", on_device_locked=True
    )
    channel_create(owner=None, kind="webhook", name="not this", url="https://h.invalid/", on_queue_empty=True)
    with django_capture_on_commit_callbacks(execute=True):
        assert device_set_state(
            device_id=device.pk, state=Device.State.LOCKED, message="Locked after a restart."
        )
        assert not device_set_state(device_id=device.pk, state=Device.State.LOCKED, message="Still locked.")
    (locked,) = Delivery.objects.all()
    assert (locked.channel_id, locked.event, locked.device_id) == (house.pk, "device.locked", device.pk)
    from notify.services import build_message

    assert build_message(locked).title == "Pocket is locked"


def test_personal_channels_cannot_take_household_events(member):
    channel = _hook(member, on_queue_empty=True, on_device_locked=True)
    assert not channel.on_queue_empty and not channel.on_device_locked


def test_the_sweep_revives_deliveries_whose_task_was_lost(
    member, settings, receiver, django_capture_on_commit_callbacks, allow_loopback
):
    import datetime as dt

    from django.utils import timezone

    from notify.services import delivery_sweep

    settings.NOTIFY_RETRY_DELAYS_S = [10.0]
    r = receiver([200])
    channel = _hook(member, url=r.url)
    now = timezone.now()
    fresh = Delivery.objects.create(channel=channel, event="test", key="fresh")
    lost = Delivery.objects.create(channel=channel, event="test", key="lost")
    died = Delivery.objects.create(channel=channel, event="test", key="died", status="sending")
    sent = Delivery.objects.create(channel=channel, event="test", key="sent", status="sent")
    Delivery.objects.filter(pk__in=[lost.pk, sent.pk]).update(created=now - dt.timedelta(minutes=3))
    Delivery.objects.filter(pk=died.pk).update(claimed_at=now - dt.timedelta(minutes=6))

    with django_capture_on_commit_callbacks() as callbacks:
        assert delivery_sweep(now=now) == 2
    assert (
        len(callbacks) == 2
    )  # a new task each for the lost and the dead one; none for the fresh or the sent
    # what those tasks do: the dead worker's row is claimed again and sent; a fresh "sending" one is left alone
    assert delivery_attempt(delivery_id=died.pk) == "sent"
    assert delivery_attempt(delivery_id=lost.pk) == "sent"
    Delivery.objects.filter(pk=fresh.pk).update(status="sending", claimed_at=timezone.now())
    assert delivery_attempt(delivery_id=fresh.pk) == ""
    assert len(r.requests) == 2
