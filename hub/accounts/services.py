from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.db import transaction

from hub import live
from hub.accounts.models import User


@dataclass(frozen=True)
class UserResult:
    user: User
    created: bool
    generated_password: str | None  # shown once, never stored in clear


def generate_password() -> str:
    return secrets.token_urlsafe(12)


@transaction.atomic
def user_create_or_update(*, username: str, role: str, password: str | None = None) -> UserResult:
    """Idempotent by username. A new person without a password gets a generated one (returned once).

    An existing person keeps their password unless one is given. Admins are also Django staff and
    superusers, so they can use the admin site.
    """
    if role not in User.Role.values:
        raise ValueError(f"unknown role {role!r}; use one of: {', '.join(User.Role.values)}")
    user = User.objects.select_for_update().filter(username=username).first()
    created = user is None
    if user is None:
        user = User(username=username)
    changed_access = not created and (user.role != role or bool(password))
    user.role = role
    user.is_staff = user.is_superuser = role == User.Role.ADMIN
    generated = None
    if password:
        user.set_password(password)
    elif created:
        generated = generate_password()
        user.set_password(generated)
    user.save()
    if changed_access:
        # A new role (or password) reaches their open sockets at once, not at their next connect.
        user_access_changed(user_id=user.pk)
    return UserResult(user=user, created=created, generated_password=generated)


def admin_exists() -> bool:
    return User.objects.filter(role=User.Role.ADMIN, is_active=True).exists()


@transaction.atomic
def user_set_active(*, user: User, active: bool) -> User:
    """Deactivate (or bring back) a person: they can't sign in, their jobs and results stay.

    Refuses to deactivate the last active admin, so the hub always has someone who can manage it.
    """
    others = User.objects.select_for_update().filter(role=User.Role.ADMIN, is_active=True).exclude(pk=user.pk)
    if not active and user.role == User.Role.ADMIN and not others.exists():
        raise ValueError("This is the last admin; make someone else an admin first.")
    User.objects.filter(pk=user.pk).update(is_active=active)
    user.is_active = active
    user_access_changed(user_id=user.pk, closed=not active)
    return user


def user_access_changed(*, user_id: int, closed: bool = False) -> None:
    """After commit, every open socket of the person re-checks what it may watch (``closed``: is closed).

    Call it wherever a role, an active flag or a password changes. Sockets also re-check on their
    heartbeat, but only this makes the change take effect at once (a demoted admin leaves ``admins`` now).
    """
    group = live.user_group(user_id)
    transaction.on_commit(lambda: live.close_group(group) if closed else live.reauthorize(group))


def session_ended(*, session_key: str | None) -> None:
    """A browser session signed out: close its sockets (other sessions of the same person stay open)."""
    if session_key:
        live.close_group(live.session_group(session_key))
