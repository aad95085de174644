"""Sign-in by a reverse proxy's header (Authelia, Authentik, oauth2-proxy): ``HUB_TRUSTED_HEADER``, e.g.
``Remote-User``, names the person the proxy signed in.

Honoured only when the connection's own address (hub.peer.direct_peer, never X-Forwarded-For) is one of
``HUB_TRUSTED_PROXIES``; from anyone else the header is ignored, whoever it names. A name the hub doesn't know
gets no session unless ``HUB_TRUSTED_HEADER_CREATE`` names the role to create it with; a deactivated person gets
none. A session already signed in as someone else is ended and replaced: the proxy says who is at the browser.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib import auth
from django.http import HttpRequest, HttpResponse

from hub.accounts import audit, sso
from hub.accounts.models import User
from hub.peer import direct_peer

log = logging.getLogger(__name__)


BACKEND = "hub.accounts.trusted_header.TrustedHeaderBackend"


def header_meta_key(name: str) -> str:
    return "HTTP_" + name.upper().replace("-", "_")


class TrustedHeaderBackend:
    """Authenticates the username the middleware read from a trusted proxy's header (and nothing else)."""

    def authenticate(self, request: HttpRequest | None, trusted_username: str | None = None, **kwargs):
        if request is None or trusted_username is None or not settings.HUB_TRUSTED_HEADER:
            return None
        if not sso.peer_trusted(direct_peer(request)):
            return None
        try:
            return sso.sign_in_outside(
                username=trusted_username,
                role=None,
                create=bool(settings.HUB_TRUSTED_HEADER_CREATE),
                default_role=settings.HUB_TRUSTED_HEADER_CREATE or None,
            )
        except sso.SignInRefused as exc:
            request.hub_sso_refusal = str(exc)
            return None

    def get_user(self, user_id):
        return User.objects.filter(pk=user_id).first()


class TrustedHeaderMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        name = settings.HUB_TRUSTED_HEADER
        if name and not request.headers.get("Authorization"):  # an API token speaks for itself
            username = request.META.get(header_meta_key(name), "").strip()
            if username and sso.peer_trusted(direct_peer(request)):
                self._sign_in(request, username)
        return self.get_response(request)

    @staticmethod
    def _sign_in(request: HttpRequest, username: str) -> None:
        user = request.user
        if user.is_authenticated and user.get_username() == username:
            return
        if user.is_authenticated:
            auth.logout(request)  # the proxy now names someone else at this browser
        # The backend itself, not auth.authenticate(): an unknown name is no failed password, and must not count
        # towards the proxy's address lockout (django-axes counts every failed authenticate()).
        found = TrustedHeaderBackend().authenticate(request, trusted_username=username)
        if found is None:
            log.info(
                "trusted header named %r: no session (%s)",
                username[:150],
                getattr(request, "hub_sso_refusal", ""),
            )
            return
        auth.login(request, found, backend=BACKEND)
        request.user = found
        audit.record(
            audit.Action.SIGNIN_SSO, actor=found, target=found, detail="trusted proxy header", request=request
        )
