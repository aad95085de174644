"""Who is calling the API: a personal token (``Authorization: Bearer thub_…``) or the browser's session.

Routers use ``auth=API_AUTH``. Either way the view sees ``request.user`` (the person) and
``request.api_token`` (the token, or None for a session), and calls :func:`require_scope` before a
write. A wrong, revoked or malformed token answers 401 ``{"detail": "…"}`` and never falls back to the
session: a script that sends a token wants to know it is bad.

The /v1/ routes answer in OpenAI's error shape, so they call :func:`authenticate_request` themselves
and translate :class:`~hub.accounts.tokens.TokenInvalid`.
"""

from __future__ import annotations

from django.http import HttpRequest
from ninja.errors import AuthenticationError, AuthorizationError, HttpError
from ninja.security import APIKeyCookie, HttpBearer
from ninja.utils import check_csrf

from hub.accounts.models import ApiToken
from hub.accounts.tokens import TokenInvalid, token_authenticate

NOT_SIGNED_IN = (
    "Authentication required: send 'Authorization: Bearer <token>' (create one at /accounts/tokens/), "
    "or sign in."
)
READ_ONLY = "This token may only read; create one with the submit scope."


def client_ip(request: HttpRequest) -> str | None:
    # REMOTE_ADDR only: X-Forwarded-For is whatever the client says unless a proxy we trust rewrote it.
    return request.META.get("REMOTE_ADDR") or None


def bearer_from(request: HttpRequest) -> str | None:
    """The raw token from the Authorization header; None when there is no such header.

    Raises TokenInvalid when the header is there but is not ``Bearer <token>``.
    """
    value = request.headers.get("Authorization")
    if value is None:
        return None
    scheme, _, raw = value.strip().partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise TokenInvalid("The Authorization header must be 'Bearer <token>'.")
    return raw.strip()


def authenticate_request(request: HttpRequest) -> ApiToken:
    """Resolve the request's bearer token, set ``request.user`` and ``request.api_token``, return the token.

    Raises TokenInvalid (with a message fit for the client) when the header is missing or the token is
    wrong, revoked, malformed, or belongs to a deactivated person.
    """
    raw = bearer_from(request)
    if raw is None:
        raise TokenInvalid(NOT_SIGNED_IN)
    token = token_authenticate(raw, ip=client_ip(request))
    request.user = token.user
    request.api_token = token
    return token


class TokenAuth(HttpBearer):
    """ninja auth for personal tokens. No Authorization header: not ours, the next auth (session) decides."""

    def __call__(self, request: HttpRequest) -> ApiToken | None:
        # Overrides HttpBearer.__call__, which logs the whole header on a scheme mismatch in DEBUG.
        if "Authorization" not in request.headers:
            return None
        try:
            return authenticate_request(request)
        except TokenInvalid as exc:
            # Raised, not returned as None: ninja then answers with this message instead of "Unauthorized"
            # and does not try the session.
            raise AuthenticationError(401, exc.message) from None

    def authenticate(self, request: HttpRequest, token: str) -> ApiToken | None:  # pragma: no cover
        return authenticate_request(request)


class SessionAuth(APIKeyCookie):
    """The browser's session, like ninja's ``django_auth`` (CSRF checked on unsafe methods).

    Not signed in answers 401 with a clear message (not a CSRF 403), so put it last in the list.
    """

    param_name = "sessionid"

    def __init__(self, csrf: bool = True) -> None:
        from django.conf import settings

        self.param_name = settings.SESSION_COOKIE_NAME
        super().__init__(csrf=csrf)

    def __call__(self, request: HttpRequest):
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated or not user.is_active:
            raise AuthenticationError(401, NOT_SIGNED_IN)
        if self.csrf and not getattr(request, "_ninja_csrf_exempt", False) and check_csrf(request):
            raise HttpError(403, "CSRF check failed; reload the page and try again.")
        request.api_token = None
        return user

    def authenticate(self, request: HttpRequest, key: str | None):  # pragma: no cover - __call__ decides
        return request.user if request.user.is_authenticated else None


API_AUTH = [TokenAuth(), SessionAuth()]


def require_scope(request: HttpRequest, scope: str) -> None:
    """403 when the request's token lacks ``scope``. Session users pass; services check their role."""
    token: ApiToken | None = getattr(request, "api_token", None)
    if token is None or token.has_scope(scope):
        return
    if scope == ApiToken.Scope.SUBMIT:
        raise AuthorizationError(403, READ_ONLY)
    raise AuthorizationError(403, f"This token lacks the {scope!r} scope.")
