from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.db import transaction

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
    user.role = role
    user.is_staff = user.is_superuser = role == User.Role.ADMIN
    generated = None
    if password:
        user.set_password(password)
    elif created:
        generated = generate_password()
        user.set_password(generated)
    user.save()
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
    return user
