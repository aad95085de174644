"""The page a locked-out sign-in gets: the login form again, saying until when (django-axes calls this)."""

from __future__ import annotations

import math

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.cache import add_never_cache_headers

from hub.accounts import sso
from hub.accounts.backends import signin_address
from hub.accounts.lockout import locked_until


def lockout_response(request: HttpRequest, original_response=None, credentials=None) -> HttpResponse:
    # Axes passes (request, response, credentials) on the sync path and shuffles them on its async path;
    # everything needed is read from the request instead.
    username = (request.POST.get("username") or "").strip()[:150]
    until = locked_until(username=username or None, address=signin_address(request))
    seconds = max(0, math.ceil((until - timezone.now()).total_seconds()))
    form = AuthenticationForm(request, initial={"username": username})
    context = {
        "form": form,
        "next": request.POST.get("next") or request.GET.get("next", ""),
        "locked_until": timezone.localtime(until),
        "locked_minutes": max(1, math.ceil(seconds / 60)),
        "local_signin": sso.local_signin_enabled(),
        "oidc_name": settings.HUB_OIDC_NAME if sso.oidc_enabled() else None,
    }
    response = render(request, "registration/login.html", context, status=429)
    response["Retry-After"] = str(seconds)
    add_never_cache_headers(response)  # like the login page it replaces
    return response
