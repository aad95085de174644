"""What a committed change must tell people, kept as rows until it has been: the durable half of the outbox.

The in-memory collection (``jobs.core.changes``) hands a transaction's changes to the outbox after it commits; a
process killed between the commit and that hand-over would lose what the change had to tell. So a change that
someone may be told of also writes a :class:`~jobs.models.Notice` in its own transaction. Whoever tells of it
(notify, the layer above, through the outbox's ``notify`` stage) takes the row (:func:`claim`) in the transaction
that makes its deliveries, and its sweep takes the rows left behind (:func:`pending`): whoever takes it tells of
it, once, and a change rolled back left none to take.

Which states are worth a row is said by the layer above at start-up (:func:`tell_of_states`): the core knows
nothing of notifications, and a transition into any other state writes nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from django.db.models import Max
from django.utils import timezone

from jobs.models import Job, Notice

_states: frozenset[str] = frozenset()


def tell_of_states(states: Iterable[str]) -> None:
    """At start-up (an ``AppConfig.ready``): a job entering one of ``states`` leaves a notice."""
    global _states
    _states = _states | frozenset(states)


def job_entered(job_id: int, seq: int, state: str) -> None:
    """Inside the transition's transaction: the job entered ``state`` with its event ``seq``."""
    if state in _states:
        Notice.objects.create(job_id=job_id, seq=seq, kind=Notice.Kind.ENTERED, state=state)


def job_waits_for_disk(job_id: int) -> None:
    """Inside the transaction that made a finished result wait for disk space (once per wait: its event)."""
    seq = Job.objects.filter(pk=job_id).values_list("last_seq", flat=True).first()
    if seq is not None:
        Notice.objects.get_or_create(job_id=job_id, seq=seq, kind=Notice.Kind.DISK_FULL)


def disk_full_seq(job_id: int) -> int | None:
    """The event a job's newest "waits for disk space" notice tells of (None: none is left)."""
    return Notice.objects.filter(job_id=job_id, kind=Notice.Kind.DISK_FULL).aggregate(m=Max("seq"))["m"]


def claim(job_id: int, seq: int, kind: str) -> bool:
    """In the teller's transaction: take the notice (delete it). False when there is none: told already (the
    hand-over and the sweep at once: the second waits for the first's commit and finds nothing), or never
    committed (a transition a savepoint rolled back)."""
    return Notice.objects.filter(job_id=job_id, seq=seq, kind=kind).delete()[0] > 0


def pending(*, older_than: dt.timedelta, limit: int, now: dt.datetime | None = None) -> list[Notice]:
    """Notices nobody prepared within ``older_than`` (their hand-over was lost), oldest first."""
    now = now or timezone.now()
    return list(Notice.objects.filter(created__lt=now - older_than).order_by("created", "pk")[:limit])


def drop_older_than(when: dt.datetime) -> int:
    """Notices still not prepared by ``when`` (a teller that fails every time): told too late to be of use."""
    return Notice.objects.filter(created__lt=when).delete()[0]
