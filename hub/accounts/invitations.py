"""Invitations: a single-use link with a role, so a new person picks their own username and password.

The raw link secret exists only in the answer that creates it (the People page shows it once, ``manage.py
invite`` prints it); the database keeps its SHA-256 (``Invitation.token_hash``) and the first 8 characters
(``prefix``) so admins can tell links apart.

Rules:
- only admins create and revoke; roles are admin, member, viewer; the link lasts 1 to 90 days (default 7);
- a link is used at most once: accepting marks it used with a compare-and-set UPDATE inside the same
  transaction that creates the person, so two browsers racing on one link make one person, never two;
- a used, revoked or expired link never makes anyone; opening it says which of those it is.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import secrets

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone

from hub.accounts import audit
from hub.accounts.models import Invitation, User
from hub.accounts.services import name_taken, user_create
from hub.links import link_origin

SECRET_BYTES = 32  # token_urlsafe(32) -> 43 characters
PREFIX_LEN = 8
DEFAULT_DAYS = 7
MAX_DAYS = 90  # a link in someone's chat history should not stay a way in for ever
MAX_PENDING = 100  # a sane bound: the list stays readable and a runaway script can't fill the table
_TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{20,128}")


class InvitationUnusable(Exception):
    """The link can't make anyone: ``status`` is "used", "revoked", "expired" or "unknown"."""

    def __init__(self, status: str) -> None:
        self.status = status
        super().__init__(status)


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


# --- services ------------------------------------------------------------------------------------------
def invitation_create(
    *, role: str, created_by: User | None, expires_days: int | None = None, note: str = ""
) -> tuple[Invitation, str]:
    """A new pending invitation and its raw secret (shown once, never stored).

    ``created_by`` None is the command line (someone with a shell on the hub is trusted like an admin).
    """
    if created_by is not None and not created_by.is_admin:
        raise PermissionDenied("Only admins may invite people.")
    if role not in User.Role.values:
        raise ValidationError(f"Unknown role {role!r}; use one of: {', '.join(User.Role.values)}.")
    days = DEFAULT_DAYS if expires_days is None else expires_days
    if not 1 <= days <= MAX_DAYS:
        raise ValidationError(f"An invitation lasts 1 to {MAX_DAYS} days.")
    note = (note or "").strip()
    if len(note) > 100:
        raise ValidationError("Keep the note under 100 characters.")
    if invitations_pending().count() >= MAX_PENDING:
        raise ValidationError(f"{MAX_PENDING} invitations are already waiting; revoke some first.")
    raw = secrets.token_urlsafe(SECRET_BYTES)
    invitation = Invitation.objects.create(
        token_hash=hash_token(raw),
        prefix=raw[:PREFIX_LEN],
        role=role,
        note=note,
        created_by=created_by,
        expires_at=timezone.now() + dt.timedelta(days=days),
    )
    return invitation, raw


def invitation_revoke(*, invitation: Invitation, by: User) -> None:
    """Revoke a pending invitation (idempotent; a used one stays used). Admins only."""
    if not by.is_admin:
        raise PermissionDenied("Only admins may revoke invitations.")
    now = timezone.now()
    Invitation.objects.filter(pk=invitation.pk, revoked_at__isnull=True, used_at__isnull=True).update(
        revoked_at=now
    )
    invitation.refresh_from_db(fields=["revoked_at", "used_at"])


def invitation_accept(*, raw: str, username: str, password: str) -> User:
    """Make the invited person and spend the link, in one transaction; raise :class:`InvitationUnusable`
    when the link can't make anyone, or ``ValidationError`` when the username is taken.

    The password is expected to have passed the validators already (the accept form runs them).
    """
    with transaction.atomic():
        invitation = invitation_find(raw)
        if invitation is None:
            raise InvitationUnusable("unknown")
        if not invitation.is_pending:
            raise InvitationUnusable(invitation.status)
        if name_taken(username):
            # Someone's display name counts too: a newcomer may not pass for a person already here.
            raise ValidationError("That username is taken; pick another.", code="username_taken")
        try:
            with transaction.atomic():  # a savepoint: a racing sign-up with the same name lands here
                user = user_create(username=username, role=invitation.role, password=password)
        except IntegrityError:
            raise ValidationError("That username is taken; pick another.", code="username_taken") from None
        now = timezone.now()
        # Compare-and-set: only the first of two racing accepts spends the link; the other's person is
        # rolled back with its transaction.
        spent = Invitation.objects.filter(
            pk=invitation.pk, used_at__isnull=True, revoked_at__isnull=True, expires_at__gt=now
        ).update(used_at=now, used_by=user)
        if spent != 1:
            invitation.refresh_from_db()
            raise InvitationUnusable(invitation.status if not invitation.is_pending else "used")
        inviter = invitation.created_by
        audit.record(audit.Action.PERSON_CREATED, actor=user, target=user,
                     detail=f"by invitation from {inviter.username if inviter else 'an admin'}",
                     data={"role": invitation.role, "via": "invitation", "invitation": invitation.prefix})  # fmt: skip
    return user


# --- selectors -----------------------------------------------------------------------------------------
def invitation_find(raw: str) -> Invitation | None:
    """The invitation whose secret is ``raw`` (whatever its status), or None. A malformed secret never
    reaches the database."""
    raw = (raw or "").strip()
    if not _TOKEN_RE.fullmatch(raw):
        return None
    return Invitation.objects.select_related("used_by").filter(token_hash=hash_token(raw)).first()


def invitations_pending() -> QuerySet[Invitation]:
    """Unused, unrevoked and unexpired, the soonest to expire first (what the People page lists)."""
    return (
        Invitation.objects.filter(
            used_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now()
        )
        .select_related("created_by")
        .order_by("expires_at", "pk")
    )


def invitation_url(raw: str, *, request: HttpRequest | None = None) -> str:
    """The link that accepts ``raw``, on :func:`hub.links.link_origin` (NoLinkOrigin when the request's Host is no
    address to send people to)."""
    return link_origin(request) + reverse("accounts-invitation-accept", args=[raw])
