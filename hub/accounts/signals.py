"""Signing out closes that session's sockets; a password sign-in that skipped its second factor is undone.

A receiver rather than an explicit call: the sign-out view is Django's own ``LogoutView`` (and the admin
site's), and ``user_logged_out`` is the one hook every sign-out passes through. It fires before the session
is flushed, so the session key is still there to name the group.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import logout
from django.contrib.auth.signals import user_logged_in, user_logged_out
from django.dispatch import receiver

from hub.accounts import two_factor
from hub.accounts.services import session_ended


@receiver(user_logged_out, dispatch_uid="hub.accounts.close_session_sockets")
def close_session_sockets(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    session = getattr(request, "session", None)
    session_ended(session_key=getattr(session, "session_key", None))


@receiver(user_logged_in, dispatch_uid="hub.accounts.password_needs_its_code")
def password_needs_its_code(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    """Someone with an authenticator signed in by password anywhere but the code page (the admin site's form, a
    door added later): the sign-in is undone before its answer leaves (hub.accounts.two_factor)."""
    if two_factor.login_lacks_code(request, user):
        logout(request)
