"""The rules of a job's read-only link (``Job.share_token``): its expiry, its password and its count of opens.

- **Expiry** (``Job.share_expires_at``, none by default): past it, the link's page answers **410 Gone** with a
  page that says "this link has expired", and its files and inputs 410 too. 410, not 404: whoever holds the token
  was given it, so saying the link existed tells them nothing new, and "expired, ask for a new one" is more use
  than "not found". A link that never existed or was revoked stays a 404.
- **Password** (``Job.share_password``: a Django password hash, never the password; "" = none): the link's page
  asks for it before showing anything, and the files and inputs answer 403 until it is given. A right password
  unlocks the link for that browser's session (:func:`unlock`); the proof kept in the session is an HMAC of the
  link and its password hash, so a new password (or a new link) locks every browser out again. Tries are limited
  per link (``HUB_SHARE_PASSWORD_RATE``, 5 a minute by default, ``hub.ratelimit``), whoever makes them: a
  guesser from many addresses is no faster; the worst a guesser does to the people who know the password is make
  them wait a minute.
- **Opens** (``Job.share_opens``): each time the link's page is shown (after the password), counted with one
  ``UPDATE ... SET share_opens = share_opens + 1``; files (a player fetching ranges) don't count. The owner sees
  it on the job page.

A new link starts with none of these: no expiry, no password, 0 opens; revoking clears them.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth.hashers import check_password, make_password
from django.db.models import F
from django.utils import timezone
from django.utils.crypto import constant_time_compare, salted_hmac

from hub.ratelimit import share_password_allowed
from jobs.models import Job

#: What the owner's form offers for the expiry: (value, label, days); "keep" changes nothing, "never" clears it.
EXPIRY_CHOICES = [
    ("keep", "Keep as it is", None),
    ("never", "Never expires", None),
    ("1", "Expires in 1 day", 1),
    ("7", "Expires in 7 days", 7),
    ("30", "Expires in 30 days", 30),
]
PASSWORD_MIN, PASSWORD_MAX = 4, 128
_SESSION = "share-link-unlocked"


def expires_at_for(choice: str, *, now: dt.datetime | None = None) -> dt.datetime | None:
    """The expiry the form's ``choice`` sets (None for "never")."""
    days = {value: d for value, _, d in EXPIRY_CHOICES}.get(choice)
    return None if days is None else (now or timezone.now()) + dt.timedelta(days=days)


def is_expired(job: Job, *, now: dt.datetime | None = None) -> bool:
    return job.share_expires_at is not None and job.share_expires_at <= (now or timezone.now())


def has_password(job: Job) -> bool:
    return bool(job.share_password)


def hashed(password: str) -> str:
    return make_password(password)


def _proof(job: Job) -> str:
    return salted_hmac("jobs.share-link", f"{job.share_token}|{job.share_password}").hexdigest()


def is_unlocked(session: Any, job: Job) -> bool:
    """Whether this browser gave the link's password (always true for a link without one)."""
    if not has_password(job):
        return True
    given = (session.get(_SESSION) or {}).get(str(job.pk), "")
    return bool(given) and constant_time_compare(given, _proof(job))


def unlock(session: Any, job: Job) -> None:
    unlocked = dict(session.get(_SESSION) or {})
    unlocked[str(job.pk)] = _proof(job)
    session[_SESSION] = unlocked


class TooManyTries(Exception):
    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after
        super().__init__(f"Too many tries; wait {retry_after} s and try again.")


def try_password(job: Job, password: str) -> bool:
    """Whether ``password`` is the link's, counting the try against the link's rate first (``TooManyTries``)."""
    wait = share_password_allowed(f"job:{job.pk}:{job.share_token[:8]}")
    if wait is not None:
        raise TooManyTries(wait)
    return bool(password) and check_password(password, job.share_password)


def count_open(job: Job) -> None:
    Job.objects.filter(pk=job.pk, share_token=job.share_token).update(share_opens=F("share_opens") + 1)


__all__ = [
    "EXPIRY_CHOICES",
    "PASSWORD_MAX",
    "PASSWORD_MIN",
    "TooManyTries",
    "count_open",
    "expires_at_for",
    "has_password",
    "hashed",
    "is_expired",
    "is_unlocked",
    "try_password",
    "unlock",
]
