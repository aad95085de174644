"""The sign-in lockout's rules (django-axes keeps the failed attempts; this decides what they lock and what lifts it).

- A username is locked after ``AXES_FAILURE_LIMIT`` failures within the cool-off, from wherever they came.
- An address is locked after ``HUB_SIGNIN_ADDRESS_FAILURES`` failures within the cool-off, whatever usernames they
  tried. Higher than a username's (four times, by default): a household or office signs in from behind one NAT
  address, and one person's typos must not lock everyone out; a script trying one password on many accounts is
  still stopped.
- A successful sign-in clears only that username's failures from that address: its own typos. Axes deleted every
  failure from the address, so a member who signed in between guesses at the admin account wiped the guesses (four,
  then a sign-in, four times over: 16 guesses and the admin's password still worked). Failures against the same
  username from elsewhere stay too: the right password here says nothing about who guessed there.
- Nothing else lifts a lockout before its cool-off ends but an admin: the People page (``signin_unlock``, recorded
  in the audit), or ``manage.py axes_reset_username`` / ``axes_reset_ip``.
"""

from __future__ import annotations

import datetime as dt

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_cool_off
from axes.models import AccessAttempt
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Max, QuerySet, Sum
from django.http import HttpRequest
from django.utils import timezone

from hub.accounts import audit
from hub.accounts.models import AuditEntry, User


def _recent(threshold: dt.datetime) -> QuerySet[AccessAttempt]:
    return AccessAttempt.objects.filter(attempt_time__gte=threshold)


def _count(attempts: QuerySet[AccessAttempt]) -> int:
    return attempts.aggregate(n=Sum("failures_since_start"))["n"] or 0


class SignInLockoutHandler(AxesDatabaseHandler):
    """Axes's database handler with the hub's rules (see the module's docstring): two limits, and a success that
    clears only its own failures."""

    def get_failures(self, request: HttpRequest, credentials: dict | None = None) -> int:
        """The failures that count against this sign-in, on the scale of ``AXES_FAILURE_LIMIT``.

        Axes compares one number with one limit. The address's count is shifted down by the difference of the two
        limits, so it reaches ``AXES_FAILURE_LIMIT`` exactly when it reaches ``HUB_SIGNIN_ADDRESS_FAILURES``.
        """
        recent = _recent(get_cool_off_threshold(request))
        username = get_client_username(request, credentials)
        by_username = _count(recent.filter(username=username)) if username else 0
        by_address = _count(recent.filter(ip_address=request.axes_ip_address))
        headroom = settings.HUB_SIGNIN_ADDRESS_FAILURES - settings.AXES_FAILURE_LIMIT
        return max(by_username, by_address - headroom)

    def reset_user_attempts(self, request: HttpRequest, credentials: dict | None = None) -> int:
        username = get_client_username(request, credentials)
        if not username:
            return 0
        mine = AccessAttempt.objects.filter(username=username, ip_address=request.axes_ip_address)
        return mine.delete()[0]


def locked_until(*, username: str | None, address: str | None) -> dt.datetime:
    """When the lockout of this sign-in ends: the newest counted failure of what is locked (the username, the
    address or both) plus the cool-off.

    Failures during a lockout are not counted (AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False),
    so the time shown does not move while the person retries.
    """
    now = timezone.now()
    recent = _recent(now - get_cool_off())
    locked = []
    if username and _count(recent.filter(username=username)) >= settings.AXES_FAILURE_LIMIT:
        locked.append(recent.filter(username=username))
    if address and _count(recent.filter(ip_address=address)) >= settings.HUB_SIGNIN_ADDRESS_FAILURES:
        locked.append(recent.filter(ip_address=address))
    newest = [q.aggregate(t=Max("attempt_time"))["t"] for q in locked]
    return max([t for t in newest if t] or [now]) + get_cool_off()


def locked_usernames() -> dict[str, dt.datetime]:
    """Username -> when its lockout ends, for every username locked now (the People page; one query)."""
    threshold = timezone.now() - get_cool_off()
    rows = (
        _recent(threshold)
        .order_by()
        .values("username")
        .annotate(n=Sum("failures_since_start"), newest=Max("attempt_time"))
        .filter(n__gte=settings.AXES_FAILURE_LIMIT)
    )
    return {row["username"]: row["newest"] + get_cool_off() for row in rows if row["username"]}


def unlocks_recent(limit: int = 20) -> QuerySet[AuditEntry]:
    """The newest sign-in unlocks, for the People page."""
    return AuditEntry.objects.filter(action=AuditEntry.Action.SIGNIN_UNLOCK)[:limit]


def signin_unlock(*, user: User, by: User) -> int:
    """An admin lifts ``user``'s sign-in lockout: every counted failure against their username, from every address,
    goes, and the audit keeps who did it and when. Returns the failures cleared.

    The address limit is left as it is: it guards every account, and an address that reached it was trying many.
    """
    if not by.is_admin:
        raise PermissionDenied("only an admin unlocks a sign-in")
    with transaction.atomic():
        cleared = _count(AccessAttempt.objects.filter(username=user.username))
        AccessAttempt.objects.filter(username=user.username).delete()
        audit.record(
            audit.Action.SIGNIN_UNLOCK,
            actor=by,
            target=user,
            detail=f"{cleared} failed sign-in(s) cleared",
            data={"cleared": cleared},
        )
    return cleared
