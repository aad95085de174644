"""The audit log: every admin action and security event, written through one function, :func:`record`.

Call it from the service that does the thing (never a view or a form), after the change is made and inside its
transaction: a change rolled back takes its entry with it. Any app may call it (it is part of hub's base, below
devices, jobs, notify and backups in pyproject's layers); the model is ``hub.accounts.models.AuditEntry``.

    from hub.accounts import audit
    audit.record(audit.Action.DEVICE_ADDED, actor=by, target=device, data={"kind": device.kind})

- ``actor``: the person who did it (None: the hub itself, e.g. a beat task's backup).
- ``target``: a person (linked), or any model row (kind and id kept, with its name), or None; ``target_name``
  names a target that isn't a row (the username a failed sign-in tried).
- ``detail``: one line for people; ``data``: a short JSON detail. Never a secret: keys that name one (password,
  token, secret, key…) are dropped, and a value that looks like a hub token is masked, whatever the caller passed.
- Where from: the client address of the request being served (``AuditRequestMiddleware`` keeps it for the
  request's duration; ``request=`` gives it explicitly), REMOTE_ADDR like every other address the hub records
  (``hub.accounts.backends.signin_address``).

Entries are kept ``HUB_AUDIT_DAYS`` days (:func:`prune`, daily from beat). The Audit page and ``GET /api/audit``
read them through :func:`entries`.
"""

from __future__ import annotations

import base64
import contextvars
import datetime as dt
import ipaddress
import re
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from hub.accounts.models import AuditEntry, User

Action = AuditEntry.Action

_request_ip: contextvars.ContextVar[str | None] = contextvars.ContextVar("audit_request_ip", default=None)

# Keys whose values are secrets, in any casing or as part of a longer key ("api_key", "new_password").
_SECRET_KEY = re.compile(r"pass|secret|token|key|otp|recovery|cookie|session", re.IGNORECASE)
_TOKEN_VALUE = re.compile(r"thub_[A-Za-z0-9_-]{8,}")
_MAX_DATA_ITEMS = 20
_MAX_VALUE_CHARS = 200


def _clean_ip(value: str | None) -> str | None:
    try:
        return str(ipaddress.ip_address((value or "").strip()))
    except ValueError:
        return None


def request_ip(request: HttpRequest | None) -> str | None:
    """The client address the hub records for ``request`` (REMOTE_ADDR; see the module's docstring)."""
    if request is None:
        return _request_ip.get()
    return _clean_ip(request.META.get("REMOTE_ADDR"))


class AuditRequestMiddleware:
    """Keeps the request's client address for :func:`record` while the request is served, so services (which
    never see the request) record where an action came from."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _request_ip.set(request_ip(request))
        try:
            return self.get_response(request)
        finally:
            _request_ip.reset(token)


def _scrub(value: Any, depth: int = 0) -> Any:
    if isinstance(value, Mapping):
        if depth > 2:
            return "…"
        items = list(value.items())[:_MAX_DATA_ITEMS]
        return {str(k): _scrub(v, depth + 1) for k, v in items if not _SECRET_KEY.search(str(k))}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_scrub(v, depth + 1) for v in list(value)[:_MAX_DATA_ITEMS]]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = _TOKEN_VALUE.sub("thub_…", str(value))
    return text[:_MAX_VALUE_CHARS]


def _target(target: Any, target_name: str | None) -> dict[str, Any]:
    if target is None:
        return {"target": None, "target_kind": "", "target_ref": "", "target_name": (target_name or "")[:150]}
    if isinstance(target, User):
        name = target_name or target.username
        return {
            "target": target,
            "target_kind": "person",
            "target_ref": str(target.pk),
            "target_name": name[:150],
        }
    kind = getattr(getattr(target, "_meta", None), "model_name", type(target).__name__.lower())
    name = target_name or str(target)
    return {"target": None, "target_kind": kind[:20], "target_ref": str(getattr(target, "pk", ""))[:64],
            "target_name": name[:150]}  # fmt: skip


def record(
    action: str,
    *,
    actor: Any = None,
    target: Any = None,
    target_name: str | None = None,
    detail: str = "",
    data: Mapping[str, Any] | None = None,
    request: HttpRequest | None = None,
) -> AuditEntry:
    """Write one audit entry (see the module's docstring for the arguments). Returns it."""
    if action not in Action.values:
        raise ValueError(f"unknown audit action {action!r}; add it to AuditEntry.Action")
    person = actor if isinstance(actor, User) and actor.pk else None
    return AuditEntry.objects.create(
        action=action,
        actor=person,
        actor_name=(person.username if person else "")[:150],
        ip=request_ip(request),
        detail=_TOKEN_VALUE.sub("thub_…", detail or "")[:200],
        data=_scrub(dict(data or {})),
        **_target(target, target_name),
    )


# --- selectors ---------------------------------------------------------------------------------------------
def entries(
    *,
    actor: str | None = None,
    action: str | None = None,
    since: dt.date | None = None,
    until: dt.date | None = None,
) -> QuerySet[AuditEntry]:
    """Entries newest first, filtered: ``actor`` by username (exact, any case), ``action`` by value, and the days
    ``since``..``until`` (both included, in the time zone active for the request: the person's own)."""
    qs = AuditEntry.objects.select_related("actor", "target").order_by("-at", "-pk")
    if actor:
        qs = qs.filter(actor_name__iexact=actor.strip())
    if action:
        qs = qs.filter(action=action)
    zone = timezone.get_current_timezone()
    if since:
        qs = qs.filter(at__gte=dt.datetime.combine(since, dt.time.min, tzinfo=zone))
    if until:
        qs = qs.filter(at__lt=dt.datetime.combine(until + dt.timedelta(days=1), dt.time.min, tzinfo=zone))
    return qs


def keep_days() -> int:
    return settings.HUB_AUDIT_DAYS


def prune(now: dt.datetime | None = None) -> int:
    """Delete entries older than ``HUB_AUDIT_DAYS`` days; returns how many went."""
    cutoff = (now or timezone.now()) - dt.timedelta(days=settings.HUB_AUDIT_DAYS)
    return AuditEntry.objects.filter(at__lt=cutoff).delete()[0]


PAGE_SIZE = 50
_MAX_CURSOR_CHARS = 120


def encode_cursor(entry: AuditEntry) -> str:
    raw = f"{entry.at.isoformat()}|{entry.pk}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[dt.datetime, int] | None:
    """(at, id) of the last entry of the previous page, or None for anything this module did not give out."""
    if not cursor or len(cursor) > _MAX_CURSOR_CHARS:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
        stamp, _, pk_text = raw.partition("|")
        at = parse_datetime(stamp)
        if at is None or timezone.is_naive(at) or not pk_text.isdigit() or not 2000 <= at.year <= 9000:
            return None
        return at.astimezone(dt.UTC), int(pk_text)
    except (ValueError, UnicodeDecodeError, OverflowError):
        return None


class BadCursor(ValueError):
    pass


def page(
    qs: QuerySet[AuditEntry], *, cursor: str | None, limit: int | None = None
) -> tuple[list[AuditEntry], str | None]:
    """One page of ``qs`` (newest first) after ``cursor``, and the cursor of the next page (None: the last).
    ``BadCursor`` for a cursor this module did not give out. ``limit``: ``PAGE_SIZE`` unless given."""
    limit = limit or PAGE_SIZE
    if cursor:
        position = decode_cursor(cursor)
        if position is None:
            raise BadCursor("Not a cursor this hub gave out; start again without it.")
        at, pk = position
        qs = qs.filter(Q(at__lt=at) | Q(at=at, pk__lt=pk))
    rows = list(qs.order_by("-at", "-pk")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, encode_cursor(rows[-1]) if more and rows else None
