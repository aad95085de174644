"""The rules of a read-only link (a job's, ``Job.share_token``, or an album's, ``Album.share_token``): its expiry,
its password and its count of opens. Every function takes the object that holds the link: anything with
``share_token``, ``share_expires_at``, ``share_password`` and ``share_opens`` (a Job or an Album).

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
from django.core.exceptions import ValidationError
from django.db.models import F
from django.utils import timezone
from django.utils.crypto import constant_time_compare, salted_hmac

from hub.ratelimit import share_password_allowed
from jobs.models import Job

#: A linked object: a Job or an Album (``share_token``, ``share_expires_at``, ``share_password``, ``share_opens``).
Linked = Any

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


def is_expired(obj: Linked, *, now: dt.datetime | None = None) -> bool:
    return obj.share_expires_at is not None and obj.share_expires_at <= (now or timezone.now())


def has_password(obj: Linked) -> bool:
    return bool(obj.share_password)


def hashed(password: str) -> str:
    return make_password(password)


def _proof(obj: Linked) -> str:
    return salted_hmac("jobs.share-link", f"{obj.share_token}|{obj.share_password}").hexdigest()


def _key(obj: Linked) -> str:
    """The link's key in the session: a job's number alone (as before albums had links), else "<model>:<pk>"."""
    return str(obj.pk) if isinstance(obj, Job) else f"{obj._meta.model_name}:{obj.pk}"


def is_unlocked(session: Any, obj: Linked) -> bool:
    """Whether this browser gave the link's password (always true for a link without one)."""
    if not has_password(obj):
        return True
    given = (session.get(_SESSION) or {}).get(_key(obj), "")
    return bool(given) and constant_time_compare(given, _proof(obj))


def unlock(session: Any, obj: Linked) -> None:
    unlocked = dict(session.get(_SESSION) or {})
    unlocked[_key(obj)] = _proof(obj)
    session[_SESSION] = unlocked


class TooManyTries(Exception):
    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after
        super().__init__(f"Too many tries; wait {retry_after} s and try again.")


def try_password(obj: Linked, password: str) -> bool:
    """Whether ``password`` is the link's, counting the try against the link's rate first (``TooManyTries``)."""
    wait = share_password_allowed(f"{obj._meta.model_name}:{obj.pk}:{obj.share_token[:8]}")
    if wait is not None:
        raise TooManyTries(wait)
    return bool(password) and check_password(password, obj.share_password)


def count_open(obj: Linked) -> None:
    type(obj).objects.filter(pk=obj.pk, share_token=obj.share_token).update(share_opens=F("share_opens") + 1)


def option_changes(
    obj: Linked, *, expires: str = "keep", password: str = "", remove_password: bool = False
) -> tuple[dict[str, Any], list[str]]:
    """The fields the owner's "expiry and password" form changes on ``obj``'s link, and a sentence for each
    (the job's history notes them). Raises ``ValidationError`` with a sentence for the page."""
    if not obj.share_token:
        raise ValidationError("Create the link first.")
    if expires not in {value for value, _, _ in EXPIRY_CHOICES}:
        raise ValidationError("Choose when the link expires from the list.")
    if password and not PASSWORD_MIN <= len(password) <= PASSWORD_MAX:
        raise ValidationError(f"A link's password has {PASSWORD_MIN} to {PASSWORD_MAX} characters.")
    fields: dict[str, Any] = {}
    notes = []
    if expires != "keep":
        fields["share_expires_at"] = expires_at_for(expires)
        notes.append(
            "The read-only link no longer expires."
            if expires == "never"
            else f"The read-only link expires in {expires} day{'s' if expires != '1' else ''}."
        )
    if password:
        fields["share_password"] = hashed(password)
        notes.append("The read-only link needs a password.")
    elif remove_password and obj.share_password:
        fields["share_password"] = ""
        notes.append("The read-only link no longer needs a password.")
    return fields, notes


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
    "option_changes",
    "try_password",
    "unlock",
]
