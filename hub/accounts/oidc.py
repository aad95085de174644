"""Single sign-on through OpenID Connect, on mozilla-django-oidc.

The library runs the authorization-code flow (state, nonce and PKCE kept in the session; the ID token's signature
checked against the provider's keys). The hub adds: the provider found from ``HUB_OIDC_ISSUER`` by discovery (or
named endpoint by endpoint), the ID token's issuer, audience and expiry checked, the person matched by username
(``HUB_OIDC_USERNAME_CLAIM``), their role from ``HUB_OIDC_ROLE_CLAIM`` (hub.accounts.sso), and failures told on
the sign-in page instead of a bare redirect. The client secret is never logged nor shown.
"""

from __future__ import annotations

import logging
import threading

import jwt
import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.shortcuts import redirect
from django.utils.decorators import method_decorator
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from hub.accounts import audit, sso

log = logging.getLogger(__name__)

#: The library's endpoint settings and the discovery document's names for them.
_DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": ("HUB_OIDC_AUTHORIZATION_ENDPOINT", "authorization_endpoint"),
    "OIDC_OP_TOKEN_ENDPOINT": ("HUB_OIDC_TOKEN_ENDPOINT", "token_endpoint"),
    "OIDC_OP_USER_ENDPOINT": ("HUB_OIDC_USERINFO_ENDPOINT", "userinfo_endpoint"),
    "OIDC_OP_JWKS_ENDPOINT": ("HUB_OIDC_JWKS_ENDPOINT", "jwks_uri"),
}
#: The library's client settings, read from the hub's at each use.
_OWN = {
    "OIDC_RP_CLIENT_ID": "HUB_OIDC_CLIENT_ID",
    "OIDC_RP_CLIENT_SECRET": "HUB_OIDC_CLIENT_SECRET",
    "OIDC_RP_SCOPES": "HUB_OIDC_SCOPES",
}
_discovery: dict[str, dict] = {}
_discovery_lock = threading.Lock()


class ProviderUnavailable(Exception):
    """The provider's discovery document could not be read."""


def discovery() -> dict:
    """``HUB_OIDC_ISSUER``'s /.well-known/openid-configuration, read once per process (a failure is not kept:
    the next sign-in tries again). Its ``issuer`` must be the configured one (OpenID Connect Discovery 4.3)."""
    issuer = settings.HUB_OIDC_ISSUER
    with _discovery_lock:
        if issuer in _discovery:
            return _discovery[issuer]
        url = f"{issuer}/.well-known/openid-configuration"
        try:
            response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
            response.raise_for_status()
            document = response.json()
        except (requests.RequestException, ValueError) as exc:
            raise ProviderUnavailable(f"{url}: {type(exc).__name__}") from None
        if not isinstance(document, dict) or document.get("issuer", "").rstrip("/") != issuer:
            raise ProviderUnavailable(f"{url} names another issuer ({document.get('issuer')!r})")
        _discovery[issuer] = document
        return document


def forget_discovery() -> None:
    with _discovery_lock:
        _discovery.clear()


def oidc_setting(attr: str, *args):
    """The library's settings: the client's from HUB_OIDC_*, the provider's endpoints from HUB_OIDC_* or else
    from discovery, the rest from Django's settings (OIDC_*)."""
    if attr in _OWN:
        return getattr(settings, _OWN[attr])
    if attr in _DISCOVERED:
        own, key = _DISCOVERED[attr]
        if value := getattr(settings, own, ""):
            return value
        if settings.HUB_OIDC_ISSUER:
            if value := discovery().get(key):
                return value
            raise ProviderUnavailable(f"the provider's discovery document has no {key}")
    return import_from_settings(attr, *args)


class HubOIDCBackend(OIDCAuthenticationBackend):
    """Signs in the person an OpenID Connect provider vouches for (see the module's notes)."""

    def __init__(self, *args, **kwargs):
        # Django makes every backend for every sign-in, passwords too: the provider's settings (and discovery,
        # a network call) are read only when this one is asked (``authenticate``); sessions need the model alone.
        self.UserModel = get_user_model()

    @staticmethod
    def get_settings(attr, *args):
        return oidc_setting(attr, *args)

    def authenticate(self, request, **kwargs):
        # Only the callback's call (it passes the nonce); a password sign-in never reaches the provider.
        if request is None or "nonce" not in kwargs or not sso.oidc_enabled():
            return None
        try:
            super().__init__()
            return super().authenticate(request, **kwargs)
        except sso.SignInRefused as exc:
            request.hub_sso_refusal = str(exc)
        except (
            requests.RequestException,
            SuspiciousOperation,
            ImproperlyConfigured,
            jwt.PyJWTError,
            ProviderUnavailable,
        ) as exc:
            # The exception's text, never the request: the token call carried the client secret.
            log.warning("OpenID Connect sign-in failed: %s", type(exc).__name__)
            request.hub_sso_refusal = "The identity provider's answer could not be checked; try again."
        return None

    def verify_token(self, token, **kwargs):
        payload = super().verify_token(token, **kwargs)
        if kwargs.get("nonce") is None:
            return payload  # a userinfo JWT, not the ID token
        issuer = settings.HUB_OIDC_ISSUER  # (endpoints named one by one: no issuer to compare with)
        if issuer and str(payload.get("iss", "")).rstrip("/") != issuer:
            raise SuspiciousOperation("ID token from another issuer")
        audience = payload.get("aud")
        audiences = [audience] if isinstance(audience, str) else list(audience or [])
        if self.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("ID token for another client")
        if "exp" not in payload:
            raise SuspiciousOperation("ID token without an expiry")
        return payload

    def verify_claims(self, claims):
        return bool(claims.get(settings.HUB_OIDC_USERNAME_CLAIM))

    def filter_users_by_claims(self, claims):
        return self.UserModel.objects.none()  # get_or_create_user below matches by username instead

    def get_or_create_user(self, access_token, id_token, payload):
        claims = self.get_userinfo(access_token, id_token, payload)
        # The userinfo answer must be about the person the ID token names (OpenID Connect Core 5.3.2).
        if claims.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("userinfo about another subject")
        claims = {**payload, **claims}
        if not self.verify_claims(claims):
            raise sso.SignInRefused(
                f"The identity provider sent no {settings.HUB_OIDC_USERNAME_CLAIM}; ask its admin to include it."
            )
        user = sso.sign_in_outside(
            username=str(claims[settings.HUB_OIDC_USERNAME_CLAIM]),
            role=sso.role_from_claims(claims),
            create=settings.HUB_OIDC_CREATE_USERS,
            default_role=settings.HUB_OIDC_DEFAULT_ROLE or None,
        )
        sso.claim_groups_hook(user, claims)
        audit.record(
            audit.Action.SIGNIN_SSO, actor=user, target=user, detail="OpenID Connect", request=self.request
        )
        return user


@method_decorator(login_not_required, name="dispatch")
class SignInStart(OIDCAuthenticationRequestView):
    """ "Sign in with …": off to the provider, with state, nonce and PKCE kept in this session."""

    def __init__(self, *args, **kwargs):
        try:
            super().__init__(*args, **kwargs)
            self.unavailable = None
        except (ProviderUnavailable, ImproperlyConfigured) as exc:
            self.unavailable = exc

    @staticmethod
    def get_settings(attr, *args):
        return oidc_setting(attr, *args)

    def get(self, request):
        if not sso.oidc_enabled():
            return redirect("login")
        if self.unavailable is not None:
            log.warning("OpenID Connect provider unavailable: %s", self.unavailable)
            messages.error(
                request, f"{settings.HUB_OIDC_NAME} can't be reached right now; try again in a moment."
            )
            return redirect("login")
        return super().get(request)


@method_decorator(login_not_required, name="dispatch")
class SignInCallback(OIDCAuthenticationCallbackView):
    """The provider sends the person back here; the library checks state, then the backend the rest."""

    @staticmethod
    def get_settings(attr, *args):
        return oidc_setting(attr, *args)

    def get(self, request):
        state = request.GET.get("state")
        if "code" in request.GET and state not in request.session.get("oidc_states", {}):
            # A state this session never sent, or one already used: a stale tab, a replayed or forged callback.
            request.hub_sso_refusal = (
                "That sign-in was not started from this browser, or was already used; try again."
            )
            return self.login_failure()
        try:
            return super().get(request)
        except SuspiciousOperation:
            # A state this session never sent: a stale tab, a replayed or forged callback.
            request.hub_sso_refusal = (
                "That sign-in was not started from this browser, or was already used; try again."
            )
            return self.login_failure()

    def login_failure(self):
        refusal = getattr(self.request, "hub_sso_refusal", None)
        if self.request.GET.get("error"):
            refusal = "The identity provider did not sign you in."
        messages.error(
            self.request, refusal or f"Signing in with {settings.HUB_OIDC_NAME} didn't work; try again."
        )
        return redirect("login")
