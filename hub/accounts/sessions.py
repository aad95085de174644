"""Who a session belongs to, read without touching it: for the code outside a request that must know (the web
server's body ceiling, a live socket re-checking its person)."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, load_backend
from django.utils.crypto import constant_time_compare


def session_user(session_key: str, user_id: int | None = None) -> Any | None:
    """Django's session check, read-only: the session exists (and names ``user_id``, when given), its backend
    still accepts the person (inactive people not) and its auth hash still matches (a password change elsewhere
    ends it). The person, or None.

    Not ``django.contrib.auth.get_user``: it flushes a session whose hash fails and gives a new key to one signed
    with a fallback secret, and outside the request that new key never reaches the browser, which is then signed
    out from under its page. The request's own middleware does both, where the answer carries the cookie.
    """
    data = import_module(settings.SESSION_ENGINE).SessionStore(session_key).load()
    backend_path, session_hash = data.get(BACKEND_SESSION_KEY), data.get(HASH_SESSION_KEY) or ""
    named = data.get(SESSION_KEY)
    if backend_path not in settings.AUTHENTICATION_BACKENDS or not session_hash or named is None:
        return None
    if user_id is not None and str(named) != str(user_id):
        return None
    user = load_backend(backend_path).get_user(named)
    if user is None or not getattr(user, "is_active", False):
        return None
    hashes = [user.get_session_auth_hash(), *user.get_session_auth_fallback_hash()]
    return user if any(constant_time_compare(session_hash, h) for h in hashes) else None
