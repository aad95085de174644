"""What a job's changes tell people: a state entered (done, failed, started; the queue run dry) and a result
waiting for disk space, each once.

A job's transition leaves a notice in its own transaction (``jobs.core.notices``, for the states this module
names at start-up: :data:`TOLD_STATES`). After the commit the jobs outbox hands the change here
(:func:`jobs_entered`, :func:`jobs_waiting_for_disk`, registered in ``NotifyConfig.ready``), which makes the
deliveries in the transaction that takes the notice (``jobs.core.notices.claim``): whoever takes it tells of it,
once, and a transition rolled back left none. A process killed in between leaves the notice, and the sweep
(:func:`notices_sweep`, beat every minute) takes it. The deliveries are keyed on the job's event besides.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.core import notices
from jobs.core.changes import Changes
from jobs.models import ACTIVE_STATES, PENDING_STATES, Job, JobState, Notice
from notify.models import Event
from notify.services import notify_event

logger = logging.getLogger("notify")

STATE_EVENTS = {"done": Event.JOB_DONE, "failed": Event.JOB_FAILED, "preparing": Event.JOB_STARTED}
FINAL = ("done", "failed", "cancelled")
#: The states whose entry is kept as a notice until told (``jobs.core.notices.tell_of_states``).
TOLD_STATES = frozenset(STATE_EVENTS) | frozenset(FINAL)
#: A notice still not prepared after this long (a teller that fails every time) is dropped: news too late.
NOTICE_HORIZON = dt.timedelta(days=1)
SWEEP_BATCH = 200


def jobs_entered(changes: Changes) -> None:
    """The jobs outbox's ``notify`` stage: each state a job entered in a transaction that committed, in order."""
    for entered in changes.entered:
        job_entered(job_id=entered.job_id, state=entered.state, seq=entered.seq)


def job_entered(*, job_id: int, state: str, seq: int) -> None:
    """Job ``job_id`` entered ``state`` (its event ``seq``) and that committed. Never raises: a failure keeps the
    notice for the sweep."""
    try:
        with transaction.atomic():
            if not notices.claim(job_id, seq, Notice.Kind.ENTERED):
                return  # told already, or the transition never committed
            event = STATE_EVENTS.get(state)
            if event:
                notify_event(event, job_id=job_id, key=f"{event}:{job_id}:{seq}")
            if state in FINAL:
                _queue_empty_after(job_id)
    except Exception:
        logger.exception("notifications for job %s (%s) could not be prepared", job_id, state)


def jobs_waiting_for_disk(changes: Changes) -> None:
    """The jobs outbox's ``notify`` stage: a finished render's result found the hub's disk full and waits for
    space. The household channels hear of it once per wait (its notice names the wait's event)."""
    for job_id in changes.disk_full:
        seq = notices.disk_full_seq(job_id)
        if seq is not None:  # else the sweep told of it already
            job_waits_for_disk(job_id=job_id, seq=seq)


def job_waits_for_disk(*, job_id: int, seq: int) -> None:
    """Never raises: a failure keeps the notice for the sweep."""
    try:
        with transaction.atomic():
            if not notices.claim(job_id, seq, Notice.Kind.DISK_FULL):
                return
            device_id = Job.objects.filter(pk=job_id).values_list("device_id", flat=True).first()
            if device_id is not None:
                notify_event(
                    Event.DISK_FULL,
                    job_id=job_id,
                    device_id=device_id,
                    key=f"{Event.DISK_FULL}:{job_id}:{seq}",
                )
    except Exception:
        logger.exception("notifications for job %s (disk full) could not be prepared", job_id)


def _queue_empty_after(job_id: int) -> None:
    device_id = Job.objects.filter(pk=job_id).values_list("device_id", flat=True).first()
    if device_id is None:
        return
    busy = Job.objects.filter(
        device_id=device_id, state__in=[*PENDING_STATES, *ACTIVE_STATES, JobState.INTERRUPTED]
    )
    if not busy.exists():
        notify_event(Event.QUEUE_EMPTY, device_id=device_id, key=f"{Event.QUEUE_EMPTY}:{device_id}:{job_id}")


def notices_sweep(*, now: dt.datetime | None = None) -> int:
    """Beat's safety net: the notices whose hand-over was lost (the process that committed the change died before
    it), prepared now; those past :data:`NOTICE_HORIZON` are dropped. Returns how many were prepared."""
    now = now or timezone.now()
    dropped = notices.drop_older_than(now - NOTICE_HORIZON)
    if dropped:
        logger.warning("%s job notices were never told in a day; dropped", dropped)
    grace = dt.timedelta(
        seconds=settings.NOTIFY_NOTICE_GRACE_S
    )  # the hand-over's time (its process may live)
    left = notices.pending(older_than=grace, limit=SWEEP_BATCH, now=now)
    for notice in left:
        if notice.kind == Notice.Kind.ENTERED:
            job_entered(job_id=notice.job_id, state=notice.state, seq=notice.seq)
        else:
            job_waits_for_disk(job_id=notice.job_id, seq=notice.seq)
    return len(left)
