"""Signing out closes that session's sockets; failed sign-ins and lockouts go to the audit log; a password sign-in
that skipped its second factor is undone.

Receivers rather than explicit calls: the sign-out view is Django's own ``LogoutView`` (and the admin
site's), and ``user_logged_out`` is the one hook every sign-out passes through. It fires before the session
is flushed, so the session key is still there to name the group. Likewise every failed sign-in (the page, the
admin site) passes ``user_login_failed``, and django-axes tells a lockout through ``user_locked_out``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from axes.signals import user_locked_out
from django.conf import settings
from django.contrib.auth import logout
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.dispatch import receiver
from django.utils import timezone

from hub.accounts import audit, two_factor
from hub.accounts.models import AuditEntry, User
from hub.accounts.services import session_ended


@receiver(user_logged_out, dispatch_uid="hub.accounts.close_session_sockets")
def close_session_sockets(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    session = getattr(request, "session", None)
    session_ended(session_key=getattr(session, "session_key", None))


@receiver(user_login_failed, dispatch_uid="hub.accounts.audit_signin_failed")
def audit_signin_failed(sender: Any, credentials: dict, request: Any = None, **kwargs: Any) -> None:
    """A failed sign-in: the username tried (never the password; Django masks it anyway) and where from."""
    username = str((credentials or {}).get("username") or "")[:150]
    person = User.objects.filter(username=username).first() if username else None
    audit.record(
        audit.Action.SIGNIN_FAILED,
        target=person,
        target_name=username or "(no username)",
        request=request,
        data={"known": person is not None},
    )


@receiver(user_locked_out, dispatch_uid="hub.accounts.audit_lockout")
def audit_lockout(
    sender: Any, request: Any, username: str | None, ip_address: str | None, **kwargs: Any
) -> None:
    """A lockout, recorded once per cool-off: axes tells it again on every refused retry."""
    name = str(username or "")[:150]
    since = timezone.now() - dt.timedelta(minutes=settings.HUB_SIGNIN_COOLOFF_MIN)
    again = AuditEntry.objects.filter(
        action=audit.Action.SIGNIN_LOCKOUT, target_name=name or "(address)", ip=ip_address, at__gte=since
    )
    if again.exists():
        return
    person = User.objects.filter(username=name).first() if name else None
    audit.record(
        audit.Action.SIGNIN_LOCKOUT,
        target=person,
        target_name=name or "(address)",
        request=request,
        data={"minutes": settings.HUB_SIGNIN_COOLOFF_MIN},
    )


@receiver(user_logged_in, dispatch_uid="hub.accounts.password_needs_its_code")
def password_needs_its_code(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    """Someone with an authenticator signed in by password anywhere but the code page (the admin site's form, a
    door added later): the sign-in is undone before its answer leaves (hub.accounts.two_factor)."""
    if two_factor.login_lacks_code(request, user):
        logout(request)
