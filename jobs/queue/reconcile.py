"""The safety net (beat runs ``reconcile`` every few seconds): after any crash, a lost message or a dead worker,
the queue moves on from what the database says. Cheap: a few indexed queries when all is well.

``reconcile`` reads the active jobs and the device leases once and runs its sweeps over them, each sending the
Celery work it finds due (``jobs.queue.enqueue``) and returning how much it sent:

1. ``revive_polls``: a render's poll chain went quiet (its countdown poll died with a worker): poll it now.
2. ``recover_orphans``: an active job whose lease lapsed (its worker died): ``recover_job`` repairs it.
3. ``resend_stops``: a cancelled render whose stop was never sent or was lost: send it (again).
4. ``release_stale_leases``: a lease left by a job that ended without giving the device back.
5. ``give_up_lost_renders``: a pool job whose device has been away mid-render for ``JOBS_DEVICE_LOST_S``: re-queued
   for another device (``jobs.queue.pool``).
6. ``pool.rebalance``: each waiting pool job in the lane of the device where it would finish first.
7. ``chains.release_ready``: a child still held whose parent is done (a release a store failure left undone) is
   released; one whose parent was cancelled or deleted is cancelled (``jobs.queue.chains``).
8. ``start_idle_queues``: a device with waiting jobs and nothing running: dispatch it (or, while it is away,
   have the poller watch for its return).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from devices.models import Device
from jobs.kinds.table import style_of
from jobs.models import ACTIVE_STATES, WAITING_STATES, DeviceLease, Job, LostRender
from jobs.queue import chains, enqueue, pool
from jobs.queue.device_watch import watch_device
from jobs.queue.dispatch import release_device
from jobs.queue.engine import POLLING_STATES, schedule_poll
from jobs.queue.outcomes import interrupt
from jobs.queue.stops import stop_sent, stops_pending

logger = logging.getLogger("jobs.queue.reconcile")

Leases = dict[int, DeviceLease]  # device id -> its lease row


def reconcile(now: dt.datetime | None = None) -> dict[str, int]:
    """The safety net's round: its sweeps, in order, over one reading of the active jobs and the leases. Returns
    how much each sent or freed."""
    now = now or timezone.now()
    active = _active_jobs()
    leases = {row.device_id: row for row in DeviceLease.objects.all()}
    busy = {job.device_id for job in active}
    counts = {
        "polls": revive_polls(active, now),
        "recovered": recover_orphans(active, leases, now),
    }
    stopping = _stops_pending(leases, busy)
    counts["stops"] = resend_stops(stopping, leases, now)
    busy |= stopping.keys()  # a device stopping a cancelled render is busy for the sweeps after this one
    counts["released"] = release_stale_leases(leases, busy, now)
    counts["lost"] = give_up_lost_renders(active, now)
    counts["unlost"] = stop_lost_renders_on_return(now)
    counts["moved"] = len(pool.rebalance(now))  # the pool's jobs in the lanes where they finish first
    counts["chained"] = chains.release_ready()
    counts["dispatched"] = start_idle_queues(leases, busy, now)
    return counts


def _active_jobs() -> list[Job]:
    return list(
        Job.objects.filter(state__in=ACTIVE_STATES)
        .select_related("device")
        .only("pk", "state", "remote_id", "next_poll_at", "poll_ticket", "kind", "device_id", "device__kind")
    )


def _in_poll_chain(job: Job) -> bool:
    """A poll-style render the device has (its remote id), watched by its poll chain rather than by its lease."""
    return (
        bool(job.remote_id) and job.state in POLLING_STATES and style_of(job.device.kind, job.kind) == "poll"
    )


def _lease_live(row: DeviceLease | None, now: dt.datetime) -> bool:
    return row is not None and row.expires_at is not None and row.expires_at >= now


# -- the sweeps --------------------------------------------------------------------------------------------------


def revive_polls(active: Iterable[Job], now: dt.datetime) -> int:
    """Poll chains that went quiet: a render whose next poll is overdue by more than two poll intervals (its
    countdown poll lived in a worker that died) is polled now, from the ticket it holds."""
    grace = dt.timedelta(seconds=max(3.0, 2 * settings.JOBS_POLL_INTERVAL_S))
    revived = 0
    for job in active:
        overdue = job.next_poll_at is None or job.next_poll_at < now - grace
        if _in_poll_chain(job) and overdue and schedule_poll(job.pk, countdown=0, ticket=job.poll_ticket):
            revived += 1
    return revived


def recover_orphans(active: Iterable[Job], leases: Leases, now: dt.datetime) -> int:
    """Jobs to recover: an active job (outside a poll chain) whose device lease is not its own or has lapsed;
    its worker died, and ``recover_job`` takes the lease for it and repairs it."""
    recovered = 0
    for job in active:
        row = leases.get(job.device_id)
        if _in_poll_chain(job) or (row is not None and row.job_id == job.pk and _lease_live(row, now)):
            continue
        enqueue.send("recover_job", job.pk)
        recovered += 1
    return recovered


def _stops_pending(leases: Leases, busy: set[int]) -> dict[int, int]:
    """{device: job} for the held leases of idle devices that a cancelled render still holds."""
    held = [device_id for device_id, row in leases.items() if row.job_id and device_id not in busy]
    return stops_pending(held) if held else {}


def resend_stops(stopping: dict[int, int], leases: Leases, now: dt.datetime) -> int:
    """Stops: a cancelled render (``stopping``: {device: job}) whose stop was never sent (the broker was down),
    or was lost (Redis restarted, the worker died before or during the stop: its lease lapsed), is stopped now.
    Sending gives the stop ``stop_pickup()`` to be claimed, so the next rounds don't send it again while it is on
    its way, and do soon if it never arrives."""
    sent = 0
    for device_id, job_id in stopping.items():
        if _lease_live(leases[device_id], now):
            continue  # a worker is on it (or its message is on the way)
        try:
            enqueue.send("cancel_on_device", job_id)
        except Exception:
            logger.warning("job %s: the stop could not be queued; next round", job_id, exc_info=True)
            continue
        stop_sent(job_id, device_id)
        sent += 1
    return sent


def release_stale_leases(leases: Leases, busy: set[int], now: dt.datetime) -> int:
    """Stale leases: held for a job on an idle device and lapsed, left by a job that ended without releasing
    (a runner died after a cancel). Freed, and the device time recorded up to the job's end."""
    released = 0
    for device_id, row in leases.items():
        if row.job_id and device_id not in busy and row.expires_at and row.expires_at < now:
            ended = Job.objects.filter(pk=row.job_id).values_list("finished_at", flat=True).first()
            released += release_device(device_id, row.job_id, ended=min(ended or now, now))
    return released


def give_up_lost_renders(active: Iterable[Job], now: dt.datetime) -> int:
    """Pool jobs whose device has been away for ``JOBS_DEVICE_LOST_S`` mid-render: interrupted and re-queued
    (once, as after any interruption); the pool then runs them elsewhere (``jobs.queue.pool.lost_renders``).

    Only once a request of the render's own confirms the device still away (``jobs.queue.pool.seen_away``): until
    then it is polled now (its chain may be dead with a worker), and a later round decides on what that poll found."""
    lost = 0
    for job in pool.lost_renders(list(active), now):
        if not pool.seen_away(job):
            schedule_poll(job.pk, countdown=0, ticket=job.poll_ticket)
            continue
        away = int((now - job.device.state_changed_at).total_seconds() // 60)
        message = (
            f"{job.device.name} has been away for {away} min while rendering this job: "
            "it goes back to the queue for another device."
        )
        with transaction.atomic():
            if job.remote_id and style_of(job.device.kind, job.kind) == "poll":
                # The device may come back still rendering it: stopped there first (engine.stop_lost_renders).
                LostRender.objects.create(device_id=job.device_id, job_id=job.pk, remote_id=job.remote_id)
            # Frees the device and re-queues the job once (its end_job dispatches, so the pool moves it).
            gone = interrupt(job, message, data={"lost_device": job.device_id, "remote_id": job.remote_id})
            if not gone:
                transaction.set_rollback(True)  # it ended meanwhile: nothing was given up
        lost += gone
    return lost


def stop_lost_renders_on_return(now: dt.datetime) -> int:
    """Devices back online with a render given up while they were away: the stop is sent (again: a lost
    message, a device away again), once their lease is free."""
    sent = 0
    rows = LostRender.objects.filter(device__state=Device.State.ONLINE).values_list("device_id", flat=True)
    for device_id in sorted(set(rows)):
        if not DeviceLease.objects.filter(pk=device_id, expires_at__gt=now).exclude(token="").exists():
            enqueue.send("stop_lost_renders", device_id)
            sent += 1
    return sent


#: A device in these states runs nothing while away; jobs wait for the poller to see it back.
AWAY = ("locked", "unreachable")


def start_idle_queues(leases: Leases, busy: set[int], now: dt.datetime) -> int:
    """Idle queues: a device with waiting jobs, nothing active and no live lease is dispatched (the dispatch that
    should have followed a job's end was lost). Paused queues and devices that refuse the hub's key are left
    alone; a device away (locked, unreachable) is watched by the poller at its fast rate instead, as when a job
    found it away itself (the poller may have found it first, and no job tried it since)."""
    dispatched = 0
    for device in _idle_with_waiting_jobs(busy):
        if device.state in AWAY:
            if device.active_until is None or device.active_until <= now:
                watch_device(device.pk)
        elif not _lease_live(leases.get(device.pk), now):
            enqueue.send("dispatch", device.pk)
            dispatched += 1
    return dispatched


def _idle_with_waiting_jobs(busy: set[int]) -> list[Device]:
    """The devices outside ``busy`` with waiting jobs whose queue may move: not paused, their key not refused."""
    waiting = set(Job.objects.filter(state__in=WAITING_STATES).values_list("device_id", flat=True).distinct())
    return list(
        Device.objects.filter(pk__in=waiting - busy, queue_paused=False)
        .exclude(state="auth_failed")
        .only("state", "queue_paused", "active_until")
    )
