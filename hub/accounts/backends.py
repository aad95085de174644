"""Sign-in throttling (django-axes) wired to the hub: which backend refuses, which address counts."""

from __future__ import annotations

from axes.backends import AxesStandaloneBackend
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest


class SignInThrottleBackend(AxesStandaloneBackend):
    """Refuses a sign-in while its username or address is locked out; authenticates nobody itself.

    Axes insists on a request. Every sign-in over the web passes one (the login form, the admin's);
    only code running inside the hub calls ``authenticate()`` without one (the test client's
    ``login()``, a shell). Nothing is there to throttle, so those pass on to the password check.
    """

    def authenticate(self, request: HttpRequest | None, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def signin_address(request: HttpRequest) -> str | None:
    # REMOTE_ADDR only: X-Forwarded-For is whatever the client says unless a proxy we trust rewrote it,
    # and honouring it would let anyone dodge the per-address limit by inventing addresses.
    return request.META.get("REMOTE_ADDR") or None


class LocalSignInGate:
    """Refuses every password sign-in while ``HUB_LOCAL_SIGNIN`` is off (single sign-on only): raising
    PermissionDenied stops Django's ``authenticate()`` before the password backend. Authenticates nobody itself,
    and has no ``get_user``: no session is ever this backend's."""

    def authenticate(self, request: HttpRequest | None, username=None, password=None, **kwargs):
        from django.conf import settings

        if password is not None and not settings.HUB_LOCAL_SIGNIN:
            raise PermissionDenied("Local sign-in is off on this hub.")
        return None
