"""Two-factor pages: the code after the password (signed out), and one's own authenticator and recovery codes.

The rules are in hub.accounts.two_factor; these views only read forms and answer.
"""

from __future__ import annotations

import math

from axes.handlers.proxy import AxesProxyHandler
from django.contrib import messages
from django.contrib.auth import login, user_login_failed
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST
from django_otp import login as otp_login

from hub.accounts import two_factor
from hub.accounts.backends import signin_address
from hub.accounts.lockout import locked_until


def _never_cached(response: HttpResponse) -> HttpResponse:
    add_never_cache_headers(response)
    return response


@login_not_required
@require_http_methods(["GET", "POST"])
def signin_code(request: HttpRequest) -> HttpResponse:
    """After the password: the authenticator's code, or a recovery code. Wrong codes count as failed sign-ins."""
    pending = two_factor.pending_user(request)
    if pending is None:
        messages.error(
            request, "Sign in with your password first (or again: that was more than 5 minutes ago)."
        )
        return redirect("login")
    user, backend, next_url = pending
    credentials = {"username": user.get_username()}
    context: dict = {}
    status = 200
    if AxesProxyHandler.is_locked(request, credentials):
        two_factor.pending_clear(request)
        until = locked_until(username=user.get_username(), address=signin_address(request))
        minutes = max(1, math.ceil((until - timezone.now()).total_seconds() / 60))
        context = {"locked_until": timezone.localtime(until), "locked_minutes": minutes}
        return _never_cached(render(request, "accounts/signin_code.html", context, status=429))
    if request.method == "POST":
        device = two_factor.code_device(user, request.POST.get("code", ""))
        if device is not None:
            two_factor.pending_clear(request)
            setattr(request, two_factor.CODE_CHECKED_ATTR, True)
            login(request, user, backend=backend)
            otp_login(request, device)
            if device.persistent_id.startswith("otp_static"):
                left = two_factor.recovery_codes_left(user)
                messages.warning(
                    request, f"You used a recovery code; {left} left. Make new ones on Two-factor sign-in."
                )
            safe = url_has_allowed_host_and_scheme(next_url, {request.get_host()}, request.is_secure())
            return redirect(next_url if next_url and safe else "dashboard")
        user_login_failed.send(sender=__name__, credentials=credentials, request=request)
        context["wrong"] = True
        status = 400
    return _never_cached(render(request, "accounts/signin_code.html", context, status=status))


@require_http_methods(["GET"])
def two_factor_page(request: HttpRequest) -> HttpResponse:
    user = request.user
    context = {
        "enabled": two_factor.has_second_factor(user),
        "required": two_factor.required_for(user),
        "local": two_factor.signed_in_locally(request),
        "codes_left": two_factor.recovery_codes_left(user),
    }
    return _never_cached(render(request, "accounts/two_factor.html", context))


@require_http_methods(["GET", "POST"])
def two_factor_setup(request: HttpRequest) -> HttpResponse:
    user = request.user
    if not two_factor.signed_in_locally(request):
        messages.error(request, "You sign in through your identity provider: its own second factor applies.")
        return redirect("accounts-2fa")
    if two_factor.has_second_factor(user) and request.method == "GET":
        return redirect("accounts-2fa")
    device = two_factor.enrolment_device(user)
    status = 200
    if request.method == "POST":
        codes = two_factor.enrolment_confirm(user=user, device=device, code=request.POST.get("code", ""))
        if codes is not None:
            otp_login(request, device)  # this session proved the code just now
            return _never_cached(render(request, "accounts/two_factor_codes.html", {"codes": codes}))
        status = 400
    context = {
        "qr": two_factor.qr_svg_data_url(device.config_url),
        "secret": two_factor.secret_base32(device),
        "uri": device.config_url,
        "wrong": request.method == "POST",
        "required": two_factor.required_for(user) and not two_factor.has_second_factor(user),
    }
    return _never_cached(render(request, "accounts/two_factor_setup.html", context, status=status))


@require_POST
def two_factor_codes(request: HttpRequest) -> HttpResponse:
    """New recovery codes (the old ones stop working), shown once."""
    if not two_factor.has_second_factor(request.user):
        return redirect("accounts-2fa")
    codes = two_factor.recovery_codes_new(request.user)
    return _never_cached(render(request, "accounts/two_factor_codes.html", {"codes": codes}))


@require_POST
def two_factor_off(request: HttpRequest) -> HttpResponse:
    """Off, with a current code (or a recovery code): a session left open is not enough to take it away."""
    if two_factor.code_device(request.user, request.POST.get("code", "")) is None:
        messages.error(request, "That code didn't match; two-factor sign-in stays on.")
        return redirect("accounts-2fa")
    try:
        two_factor.second_factor_remove(user=request.user, by=request.user)
    except ValueError as exc:
        messages.error(request, str(exc))
        return redirect("accounts-2fa")
    messages.success(request, "Two-factor sign-in is off.")
    return redirect("accounts-2fa")
