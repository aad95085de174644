"""Personal API tokens: create, revoke, list, and resolve a raw token to its row.

A token looks like ``thub_<43 url-safe chars>`` (32 random bytes). The raw token exists only in the
response that creates it; the database keeps its SHA-256 (``ApiToken.key_hash``) and the first 8
characters of the secret (``prefix``) so people can tell their tokens apart in a list.

Rules:
- scopes are "read" and "submit"; viewers may only hold "read" tokens;
- the owner or an admin may revoke; a revoked token never works again;
- a deactivated person's tokens stop working at once (checked on every request, nothing to revoke);
- ``last_used_at``/``last_used_ip`` are refreshed at most once a minute, so a busy script does not
  turn every read into a database write;
- a token may expire (``expires_at``; ``--expires-in 12h`` on the command line, a date or a duration on the
  Tokens page): past it, it answers 401 "This token expired …" in each door's shape;
- a token may be bound to devices (``device_ids``): its jobs run only there, and "any device" means any of
  those. The rule is applied once, where a submission's device or pool is chosen
  (``jobs.queue.submission.preview``); :func:`token_devices` tells it which devices the request's token allows;
- making and revoking a token is recorded in the audit log (``hub.accounts.audit``), never its value.

Accounts sit below devices (pyproject's layers), so the device names a token is bound to are resolved by a hook
the devices app registers at start-up (:func:`register_device_lookup`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import re
import secrets
from collections.abc import Callable, Iterable
from datetime import timedelta

from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q, QuerySet
from django.utils import timezone

from hub.accounts import audit
from hub.accounts.models import ApiToken, User

TOKEN_PREFIX = "thub_"  # noqa: S105 - a public marker, not a secret
SECRET_BYTES = 32  # token_urlsafe(32) -> 43 characters
PREFIX_LEN = 8
MAX_LIVE_TOKENS_PER_PERSON = 50  # a sane bound; nobody needs more, and the list stays readable
LAST_USED_EVERY = timedelta(minutes=1)
SCOPES = tuple(ApiToken.Scope.values)  # ("read", "submit")

# Anything a well-meaning client could send: our prefix, then url-safe base64. Checked before hashing so a
# malformed header gets a precise message and never reaches the database.
_TOKEN_RE = re.compile(rf"{TOKEN_PREFIX}[A-Za-z0-9_-]{{20,128}}")
_DURATION_RE = re.compile(r"(\d{1,6})\s*([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_LIFETIME = timedelta(days=5 * 366)  # a bound that keeps dates sane; "never" is no expiry at all

#: ``(user, names) -> {name: id}`` of the devices ``user`` may use, raising ValidationError naming an unknown one;
#: and ``ids -> {id: name}`` for showing them. Registered by the devices app (``devices.apps``).
DeviceLookup = Callable[[User, list[str]], dict[str, int]]
DeviceNames = Callable[[Iterable[int]], dict[int, str]]
DeviceChoices = Callable[[User], list[str]]
_device_lookup: list[DeviceLookup] = []
_device_names: list[DeviceNames] = []
_device_choices: list[DeviceChoices] = []


def register_device_lookup(lookup: DeviceLookup, names: DeviceNames, choices: DeviceChoices) -> None:
    _device_lookup[:] = [lookup]
    _device_names[:] = [names]
    _device_choices[:] = [choices]


def device_choices(user: User) -> list[str]:
    """The names of the devices ``user`` may bind a token to (the Tokens page's choice)."""
    return _device_choices[0](user) if _device_choices else []


def device_names(ids: Iterable[int]) -> dict[int, str]:
    """Id -> name of those of ``ids`` that still exist (nothing before the devices app registered)."""
    ids = list(ids)
    return _device_names[0](ids) if _device_names and ids else {}


class TokenInvalid(Exception):
    """The token is unknown, revoked, malformed, or its owner is deactivated. ``str(exc)`` is for the client."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        return self.message


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def generate_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(SECRET_BYTES)


def parse_expires_in(text: str) -> timedelta:
    """``30s``, ``45m``, ``12h``, ``7d``, ``2w`` as a duration; ValueError with a message for a person otherwise."""
    match = _DURATION_RE.fullmatch((text or "").strip().lower())
    if not match or int(match[1]) == 0:
        raise ValueError(
            f"{text!r} is not a duration; write a number and a unit, e.g. 30s, 45m, 12h, 7d or 2w."
        )
    span = timedelta(seconds=int(match[1]) * _UNIT_SECONDS[match[2]])
    if span > MAX_LIFETIME:
        raise ValueError(f"{text!r} is too long; a token may live at most 5 years (or leave out the expiry).")
    return span


def _check_expiry(expires_at: dt.datetime | None) -> dt.datetime | None:
    if expires_at is None:
        return None
    now = timezone.now()
    if expires_at <= now:
        raise ValidationError("The expiry is in the past; choose a later date or a duration.")
    if expires_at > now + MAX_LIFETIME:
        raise ValidationError("A token may live at most 5 years; choose an earlier expiry, or none.")
    return expires_at


def _device_ids(user: User, devices: Iterable[str]) -> list[int]:
    names = list(dict.fromkeys(n.strip() for n in devices if n and n.strip()))
    if not names:
        return []
    if not _device_lookup:  # pragma: no cover - the devices app registers it at start-up
        raise ValidationError("Devices are not available to bind a token to.")
    found = _device_lookup[0](user, names)
    return sorted(set(found.values()))


def _scopes_for(user: User, scopes: Iterable[str]) -> set[str]:
    """The scopes asked for, checked against what ``user`` may hold (submit implies read)."""
    wanted = {s.strip() for s in scopes if s and s.strip()}
    unknown = wanted - set(SCOPES)
    if unknown:
        raise ValidationError(f"Unknown scope {sorted(unknown)[0]!r}; use read and/or submit.")
    if not wanted:
        raise ValidationError("Choose at least one scope: read, or read and submit.")
    if not user.is_active:
        raise ValidationError("This person is deactivated; bring them back first.")
    if ApiToken.Scope.SUBMIT in wanted:
        if not user.can_submit:
            raise ValidationError(
                "Viewers may only create read tokens; ask an admin to make you a member to submit jobs."
            )
        # Submitting without reading your own job's progress is useless, so submit implies read.
        wanted.add(ApiToken.Scope.READ)
    return wanted


# --- services ------------------------------------------------------------------------------------------
def token_create(
    *,
    user: User,
    name: str,
    scopes: list[str],
    expires_at: dt.datetime | None = None,
    devices: Iterable[str] = (),
    by: User | None = None,
) -> tuple[ApiToken, str]:
    """Create a token for ``user``; return the row and the raw token (shown once, never stored).

    ``expires_at``: when it stops working (None: never). ``devices``: names of the devices its jobs may run on
    (none: any the person may use). ``by``: who made it, for the audit log (default: ``user``)."""
    name = (name or "").strip()
    if not name:
        raise ValidationError("Give the token a name, e.g. the script or machine that will use it.")
    if len(name) > 100:
        raise ValidationError("Keep the name under 100 characters.")
    wanted = _scopes_for(user, scopes)
    expires_at = _check_expiry(expires_at)
    device_ids = _device_ids(user, devices)
    live = user.api_tokens.filter(revoked_at__isnull=True).exclude(expires_at__lte=timezone.now())
    if live.count() >= MAX_LIVE_TOKENS_PER_PERSON:
        raise ValidationError(
            f"You already have {MAX_LIVE_TOKENS_PER_PERSON} live tokens; revoke some you no longer use."
        )
    raw = generate_token()
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=raw[len(TOKEN_PREFIX) : len(TOKEN_PREFIX) + PREFIX_LEN],
        key_hash=hash_token(raw),
        scopes=",".join(s for s in SCOPES if s in wanted),  # stable order: "read,submit"
        expires_at=expires_at,
        device_ids=device_ids,
    )
    audit.record(
        audit.Action.TOKEN_CREATED,
        actor=by or user,
        target=user,
        detail=f"“{token.name}” (thub_{token.prefix}…)",
        data={
            "name": token.name,
            "prefix": token.prefix,
            "scopes": token.scope_list,
            "expires_at": expires_at.isoformat() if expires_at else None,
            "devices": sorted(device_names(device_ids).values()),
        },
    )
    return token, raw


def token_revoke(*, token: ApiToken, by: User) -> None:
    """Revoke ``token`` (idempotent). Only its owner or an admin may."""
    if not (by.is_active and (token.user_id == by.pk or by.is_admin)):
        raise PermissionDenied("Only the token's owner or an admin may revoke it.")
    now = timezone.now()
    # Conditional, so a second revoke keeps the first moment (and is recorded once).
    revoked = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now)
    if token.revoked_at is None:
        token.revoked_at = now
    if revoked:
        audit.record(
            audit.Action.TOKEN_REVOKED,
            actor=by,
            target=token.user,
            detail=f"“{token.name}” (thub_{token.prefix}…)",
            data={"name": token.name, "prefix": token.prefix},
        )


def token_authenticate(raw: str, *, ip: str | None = None) -> ApiToken:
    """Resolve a raw token to its live row, or raise :class:`TokenInvalid` with a message for the client."""
    token = _live_token(raw)
    _touch(token, ip=_clean_ip(ip))
    # The binding travels with the person the request acts as, into every Submission built from them.
    token.user.token_device_ids = list(token.device_ids or [])
    return token


def token_devices(owner: object) -> list[int] | None:
    """The ids of the devices the request's token allows its jobs to run on; None: no limit (a session, or a
    token bound to none). Read from the person ``authenticate_request`` set on the request."""
    ids = getattr(owner, "token_device_ids", None)
    return list(ids) if ids else None


def token_is_live(raw: str) -> bool:
    """Whether ``raw`` would authenticate now; records no use (the web server asks before reading a body)."""
    try:
        _live_token(raw)
    except TokenInvalid:
        return False
    return True


def _live_token(raw: str) -> ApiToken:
    """The live row of a raw token, or :class:`TokenInvalid`.

    The lookup is by the hash's unique index: comparing hashes in the database leaks no useful timing,
    because an attacker cannot choose inputs that hash to a known prefix.
    """
    raw = (raw or "").strip()
    if not raw:
        raise TokenInvalid("No token given; send 'Authorization: Bearer thub_…'.")
    if not _TOKEN_RE.fullmatch(raw):
        raise TokenInvalid(
            "Malformed token; hub tokens start with 'thub_' (create one at /accounts/tokens/)."
        )
    token = ApiToken.objects.select_related("user").filter(key_hash=hash_token(raw)).first()
    if token is None:
        raise TokenInvalid(
            "Unknown token; check it was copied whole, or create a new one at /accounts/tokens/."
        )
    if token.revoked_at is not None:
        raise TokenInvalid("This token was revoked; create a new one at /accounts/tokens/.")
    if token.is_expired:
        when = token.expires_at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        raise TokenInvalid(f"This token expired at {when}; create a new one at /accounts/tokens/.")
    if not token.user.is_active:
        raise TokenInvalid("This token's owner is deactivated.")
    return token


def _touch(token: ApiToken, *, ip: str | None) -> None:
    """Record use at most once a minute: skip when the row is fresh, and let the UPDATE's own condition
    settle races between parallel requests (only one of them writes)."""
    now = timezone.now()
    stale = now - LAST_USED_EVERY
    if token.last_used_at is not None and token.last_used_at > stale:
        return
    written = (
        ApiToken.objects.filter(pk=token.pk)
        .filter(Q(last_used_at__isnull=True) | Q(last_used_at__lte=stale))
        .update(last_used_at=now, last_used_ip=ip)
    )
    if written:
        token.last_used_at, token.last_used_ip = now, ip


def _clean_ip(ip: str | None) -> str | None:
    if not ip:
        return None
    try:
        return str(ipaddress.ip_address(ip.strip()))
    except ValueError:
        return None


# --- selectors -----------------------------------------------------------------------------------------
def tokens_visible_to(user: User, *, include_revoked: bool = False) -> QuerySet[ApiToken]:
    """A person's own tokens; admins see everyone's. Newest first, owners joined for the list."""
    qs = ApiToken.objects.select_related("user").order_by("-created", "-pk")
    if not user.is_admin:
        qs = qs.filter(user=user)
    if not include_revoked:
        qs = qs.filter(revoked_at__isnull=True)
    return qs


def tokens_with_device_names(user: User) -> list[ApiToken]:
    """``tokens_visible_to(user)``, each with ``bound_names``: the names of the devices it is bound to that still
    exist (the Tokens page)."""
    rows = list(tokens_visible_to(user))
    names = device_names({pk for t in rows for pk in t.device_ids or []})
    for t in rows:
        t.bound_names = [names[pk] for pk in t.device_ids or [] if pk in names]
    return rows
