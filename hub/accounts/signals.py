"""Signing out closes that session's sockets.

A receiver rather than an explicit call: the sign-out view is Django's own ``LogoutView`` (and the admin
site's), and ``user_logged_out`` is the one hook every sign-out passes through. It fires before the session
is flushed, so the session key is still there to name the group.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.signals import user_logged_out
from django.dispatch import receiver

from hub.accounts.services import session_ended


@receiver(user_logged_out, dispatch_uid="hub.accounts.close_session_sockets")
def close_session_sockets(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    session = getattr(request, "session", None)
    session_ended(session_key=getattr(session, "session_key", None))
