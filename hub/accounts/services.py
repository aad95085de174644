from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q

from hub import live
from hub.accounts import audit
from hub.accounts.models import User
from hub.accounts.timezones import is_time_zone


@dataclass(frozen=True)
class UserResult:
    user: User
    created: bool
    generated_password: str | None  # shown once, never stored in clear


def generate_password() -> str:
    return secrets.token_urlsafe(12)


@transaction.atomic
def user_create_or_update(
    *, username: str, role: str, password: str | None = None, by: User | None = None
) -> UserResult:
    """Idempotent by username. A new person without a password gets a generated one (returned once).

    An existing person keeps their password unless one is given. Admins are also Django staff and
    superusers, so they can use the admin site. ``by``: who did it, for the audit log (None: the command line).
    """
    if role not in User.Role.values:
        raise ValueError(f"unknown role {role!r}; use one of: {', '.join(User.Role.values)}")
    user = User.objects.select_for_update().filter(username=username).first()
    created = user is None
    if user is None:
        user = User(username=username)
    old_role = None if created else user.role
    changed_access = not created and (user.role != role or bool(password))
    _set_role(user, role)
    generated = None
    if password:
        user.set_password(password)
    elif created:
        generated = generate_password()
        user.set_password(generated)
    user.save()
    if created:
        audit.record(audit.Action.PERSON_CREATED, actor=by, target=user, data={"role": role})
    elif old_role != role:
        audit.record(audit.Action.PERSON_ROLE, actor=by, target=user, detail=f"{old_role} → {role}",
                     data={"from": old_role, "to": role})  # fmt: skip
    if password and not created:
        audit.record(audit.Action.PERSON_PASSWORD, actor=by, target=user, detail="password set")
    if changed_access:
        # A new role (or password) reaches their open sockets at once, not at their next connect.
        user_access_changed(user_id=user.pk)
    return UserResult(user=user, created=created, generated_password=generated)


def _set_role(user: User, role: str) -> None:
    user.role = role
    user.is_staff = user.is_superuser = role == User.Role.ADMIN


def user_create(*, username: str, role: str, password: str) -> User:
    """A new person, never an update of someone else: a taken username raises IntegrityError (the insert
    itself decides, so two sign-ups racing for one name can't both "win" or overwrite each other)."""
    if role not in User.Role.values:
        raise ValueError(f"unknown role {role!r}; use one of: {', '.join(User.Role.values)}")
    user = User(username=username)
    _set_role(user, role)
    user.set_password(password)
    user.save(force_insert=True)
    return user


def user_set_one_time_password(*, user: User, by: User) -> str:
    """Give ``user`` a generated password (returned once, never stored in clear) that they must replace at
    their next sign-in. Their open sessions end (Django's session hash follows the password) and their
    sockets close; their API tokens keep working (a token is not a password)."""
    if not by.is_admin:
        raise PermissionDenied("Only admins may reset someone's password.")
    if user.pk == by.pk:
        raise ValueError("Change your own password on the password page.")
    if not user.is_active:
        raise ValueError(f"{user} is deactivated; bring them back first.")
    password = generate_password()
    user.set_password(password)
    user.must_change_password = True
    user.save(update_fields=["password", "must_change_password"])
    audit.record(audit.Action.PERSON_PASSWORD, actor=by, target=user, detail="one-time password given")
    user_access_changed(user_id=user.pk, closed=True)
    return password


def user_password_changed(*, user: User) -> None:
    """They chose their own password (the password page, or a reset by email): the one-time one is gone."""
    if user.must_change_password:
        User.objects.filter(pk=user.pk).update(must_change_password=False)
        user.must_change_password = False


def password_reset_mail_send(*, user_id: int, base_url: str) -> bool:
    """Mail a person a link to choose a new password (the task ``password_reset_mail`` calls this).

    The link's token is made here, in the worker, so no secret travels through the broker; it is Django's
    ``default_token_generator``, which the reset-confirm page checks (single use: it covers the password
    hash and the last sign-in). Returns whether a mail went out: nobody for a person who is gone, deactivated,
    has no address or no usable password.
    """
    from django.contrib.auth.tokens import default_token_generator
    from django.core.mail import send_mail
    from django.template.loader import render_to_string
    from django.utils.encoding import force_bytes
    from django.utils.http import urlsafe_base64_encode

    user = User.objects.filter(pk=user_id, is_active=True).first()
    if user is None or not user.email or not user.has_usable_password():
        return False
    context = {
        "user": user,
        "hub_url": base_url,
        "uid": urlsafe_base64_encode(force_bytes(user.pk)),
        "token": default_token_generator.make_token(user),
    }
    subject = "".join(render_to_string("registration/password_reset_subject.txt", context).splitlines())
    body = render_to_string("registration/password_reset_email.txt", context)
    send_mail(subject, body, None, [user.email])
    return True


def user_update_settings(*, user: User, display_name: str, email: str, time_zone: str) -> User:
    """A person's own settings. The form validates the time zone against zoneinfo; this checks it again,
    since every door must agree on what may be stored."""
    if time_zone and not is_time_zone(time_zone):
        raise ValidationError(f"{time_zone!r} is not a time zone this hub knows.")
    display_name = (display_name or "").strip()[:150]
    if display_name and name_taken(display_name, besides=user):
        # Names are how people tell whose render is whose: one may not pass for another.
        raise ValidationError(f"“{display_name}” is already someone else's name here; pick another.")
    user.display_name = display_name
    user.email = User.objects.normalize_email((email or "").strip())
    user.time_zone = time_zone
    user.full_clean(validate_unique=False, validate_constraints=False)
    user.save(update_fields=["display_name", "email", "time_zone"])
    return user


def name_taken(name: str, *, besides: User | None = None) -> bool:
    """The one rule for names: ``name`` is taken when it is someone's username or display name, in any case
    ("Otto O." and "otto o." are one name). ``besides`` is the person choosing it, whose own names don't count.

    Names are how people tell whose render is whose, so a new username (the People page's "Add someone", an
    invitation) and a display name (Settings) are all checked against both, and nobody passes for another.
    """
    others = User.objects.all() if besides is None else User.objects.exclude(pk=besides.pk)
    return others.filter(Q(username__iexact=name) | Q(display_name__iexact=name)).exists()


def admin_exists() -> bool:
    return User.objects.filter(role=User.Role.ADMIN, is_active=True).exists()


@transaction.atomic
def user_set_active(*, user: User, active: bool, by: User | None = None) -> User:
    """Deactivate (or bring back) a person: they can't sign in, their jobs and results stay.

    Refuses to deactivate the last active admin, so the hub always has someone who can manage it.
    ``by``: who did it, for the audit log.
    """
    others = User.objects.select_for_update().filter(role=User.Role.ADMIN, is_active=True).exclude(pk=user.pk)
    if not active and user.role == User.Role.ADMIN and not others.exists():
        raise ValueError("This is the last admin; make someone else an admin first.")
    changed = User.objects.filter(pk=user.pk).exclude(is_active=active).update(is_active=active)
    user.is_active = active
    if changed:
        action = audit.Action.PERSON_REACTIVATED if active else audit.Action.PERSON_DEACTIVATED
        audit.record(action, actor=by, target=user)
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
