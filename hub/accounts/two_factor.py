"""Two factors for local accounts (django-otp): an authenticator app's codes (TOTP) and ten recovery codes.

The rules: a person with a confirmed authenticator signs in with their password *and then* a code; until the code
the session is nobody's (the password only leaves a short-lived "pending" mark, :func:`pending_set`). A recovery
code works once in place of a code. Wrong codes count as failed sign-ins for django-axes, so guessing codes meets
the same lockout as guessing passwords (plus django-otp's own growing delay per device). ``HUB_ADMIN_2FA``: an
admin signed in with a password and no authenticator is sent to set one up before anything else
(hub.accounts.middleware.SecondFactorMiddleware). People signed in through OpenID Connect or a trusted header
are their provider's to check; API tokens are not passwords and are unaffected.
"""

from __future__ import annotations

import base64
import time

import segno
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY
from django.db import transaction
from django.http import HttpRequest
from django_otp import DEVICE_ID_SESSION_KEY, devices_for_user, user_has_device
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from hub.accounts.models import User

RECOVERY_CODES = 10
PENDING_KEY = "hub_2fa_pending"
#: Set on the request by the code page just before it signs the person in (hub.accounts.signals lets it pass).
CODE_CHECKED_ATTR = "hub_2fa_code_checked"
#: A password checked this long ago still waits for its code; after that, sign in again.
PENDING_S = 300
#: Sessions from these backends were signed in elsewhere (the provider checks its own second factor).
OUTSIDE_BACKENDS = ("hub.accounts.oidc.HubOIDCBackend", "hub.accounts.trusted_header.TrustedHeaderBackend")


def has_second_factor(user: User) -> bool:
    return user_has_device(user, confirmed=True)


def signed_in_locally(request: HttpRequest) -> bool:
    return request.session.get(BACKEND_SESSION_KEY) not in OUTSIDE_BACKENDS


def session_verified(request: HttpRequest) -> bool:
    return bool(request.session.get(DEVICE_ID_SESSION_KEY))


def login_lacks_code(request: HttpRequest | None, user: User) -> bool:
    """A password sign-in (any door: the admin site, a test client, a door added later) of someone who has an
    authenticator, that did not come through the code page."""
    if request is None or getattr(request, CODE_CHECKED_ATTR, False):
        return False
    backend = getattr(user, "backend", None) or request.session.get(BACKEND_SESSION_KEY)
    return backend not in OUTSIDE_BACKENDS and has_second_factor(user)


def required_for(user: User) -> bool:
    return bool(settings.HUB_ADMIN_2FA) and user.is_admin


# --- signing in: the password, then the code ---------------------------------------------------------------
def pending_set(request: HttpRequest, *, user: User, backend: str, next_url: str) -> None:
    request.session.cycle_key()  # nothing carried over from before the password
    request.session[PENDING_KEY] = {"user": user.pk, "backend": backend, "next": next_url, "at": time.time()}


def pending_user(request: HttpRequest) -> tuple[User, str, str] | None:
    """(person, backend, next) of a password checked in this session and waiting for its code, or None."""
    pending = request.session.get(PENDING_KEY)
    if not isinstance(pending, dict) or time.time() - pending.get("at", 0) > PENDING_S:
        return None
    user = User.objects.filter(pk=pending.get("user"), is_active=True).first()
    return (user, pending["backend"], pending.get("next") or "") if user else None


def pending_clear(request: HttpRequest) -> None:
    request.session.pop(PENDING_KEY, None)


def code_device(user: User, code: str):
    """The device (authenticator or recovery codes) that accepts ``code``, or None. A recovery code is used up."""
    code = "".join(code.split()).lower()
    if not code or len(code) > 16:
        return None
    with transaction.atomic():
        for device in devices_for_user(user, confirmed=True, for_verify=True):
            if device.verify_token(code):
                return device
    return None


# --- setting up and turning off -------------------------------------------------------------------------------
def enrolment_device(user: User) -> TOTPDevice:
    """The authenticator being set up: an unconfirmed one of theirs (the same secret on each visit), or a new one."""
    device = TOTPDevice.objects.filter(user=user, confirmed=False).first()
    return device or TOTPDevice.objects.create(user=user, name="Authenticator app", confirmed=False)


def qr_svg_data_url(uri: str) -> str:
    """The otpauth:// URI as a QR code, an SVG in a data: URL (the CSP allows data: images; no script)."""
    return segno.make(uri, error="m").svg_data_uri(scale=5, dark="#000", light="#fff")


def secret_base32(device: TOTPDevice) -> str:
    return base64.b32encode(device.bin_key).decode().rstrip("=")


@transaction.atomic
def enrolment_confirm(*, user: User, device: TOTPDevice, code: str) -> list[str] | None:
    """The first code from the app proves it holds the secret: the authenticator is on, any other is gone, and new
    recovery codes are made. Returns them (shown once; django-otp keeps them in its table until used) or None."""
    if device.user_id != user.pk or device.confirmed or not device.verify_token("".join(code.split())):
        return None
    TOTPDevice.objects.filter(user=user).exclude(pk=device.pk).delete()
    device.confirmed = True
    device.save(update_fields=["confirmed"])
    return recovery_codes_new(user)


def recovery_codes_new(user: User) -> list[str]:
    StaticDevice.objects.filter(user=user).delete()
    static = StaticDevice.objects.create(user=user, name="Recovery codes", confirmed=True)
    codes = [StaticToken.random_token() for _ in range(RECOVERY_CODES)]
    StaticToken.objects.bulk_create([StaticToken(device=static, token=code) for code in codes])
    return codes


def recovery_codes_left(user: User) -> int:
    return StaticToken.objects.filter(device__user=user, device__confirmed=True).count()


@transaction.atomic
def second_factor_remove(*, user: User, by: User | None) -> None:
    """Turn two factors off: their own choice (not while HUB_ADMIN_2FA requires it of them), or an admin's for
    someone who lost their phone and their codes (``by`` None: ``manage.py two_factor_off`` on the hub's machine)."""
    if by is None:
        pass
    elif by.pk == user.pk and required_for(user):
        raise ValueError("Admins must keep two-factor sign-in on this hub (HUB_ADMIN_2FA).")
    elif by.pk != user.pk and not by.is_admin:
        raise PermissionError("Only admins may turn off someone else's two-factor sign-in.")
    TOTPDevice.objects.filter(user=user).delete()
    StaticDevice.objects.filter(user=user).delete()
