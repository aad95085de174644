"""Per-request account middleware: the person's own time zone, and the one-time password's "change it now"."""

from __future__ import annotations

from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone

from hub.accounts import two_factor
from hub.accounts.timezones import zone


class TimeZoneMiddleware:
    """Activate the signed-in person's time zone, so every ``|date``/``|time`` and form of the request shows
    and reads their own times. Anyone else (and anyone who chose none) gets the hub's, HUB_TIME_ZONE."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        chosen = zone(user.time_zone) if user is not None and user.is_authenticated else None
        if chosen is not None:
            timezone.activate(chosen)
        else:
            timezone.deactivate()
        try:
            return self.get_response(request)
        finally:
            # Threads serve many requests: never let one person's zone reach the next request.
            timezone.deactivate()


class MustChangePasswordMiddleware:
    """While someone signs in with a one-time password an admin gave them, every page leads to the password
    page. Passing: the password pages, signing out, static files, and requests carrying an API token (a token
    is not the password; scripts keep working)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated or not user.must_change_password:
            return self.get_response(request)
        if request.headers.get("Authorization") or self._passes(request.path_info):
            return self.get_response(request)
        target = reverse("password_change")
        if request.path_info.startswith(("/api/", "/v1/")):
            return JsonResponse({"detail": f"Choose your own password first, at {target}."}, status=403)
        if request.headers.get("HX-Request"):
            response = HttpResponse(status=204)
            response["HX-Redirect"] = target
            return response
        return redirect(target)

    @staticmethod
    def _passes(path: str) -> bool:
        from django.conf import settings

        allowed = (
            reverse("password_change"),
            reverse("password_change_done"),
            reverse("logout"),
            settings.STATIC_URL,
            "/favicon.ico",
            "/manifest.webmanifest",
        )
        return path.startswith(allowed)


class SecondFactorMiddleware:
    """``HUB_ADMIN_2FA``: an admin signed in with a password and no authenticator is sent to set one up before
    anything else (a session of theirs from before they set it up ends). Nobody else's request costs a query.

    (A password sign-in of someone who has an authenticator, by any door but the code page, is ended as it is
    made: hub.accounts.signals.) Sessions of OpenID Connect and the trusted header are their provider's to check;
    API tokens pass.
    """

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated or not two_factor.required_for(user):
            return self.get_response(request)
        if request.headers.get("Authorization") or two_factor.session_verified(request):
            return self.get_response(request)
        if not two_factor.signed_in_locally(request) or self._passes(request.path_info):
            return self.get_response(request)
        if two_factor.has_second_factor(user):
            logout(request)  # opened before they set it up: sign in again, with the code
            return redirect_to(request, f"{reverse('login')}?next={request.path}")
        return redirect_to(request, reverse("accounts-2fa-setup"), "Set up two-factor sign-in first")

    @staticmethod
    def _passes(path: str) -> bool:
        from django.conf import settings

        allowed = (reverse("accounts-2fa-setup"), reverse("logout"), settings.STATIC_URL, "/favicon.ico")
        return path.startswith(allowed)


def redirect_to(request: HttpRequest, target: str, why: str = "Sign in again") -> HttpResponse:
    """A page to go to: a redirect, htmx's HX-Redirect, or a JSON 403 for the APIs."""
    if request.path_info.startswith(("/api/", "/v1/")):
        return JsonResponse({"detail": f"{why}, at {target}."}, status=403)
    if request.headers.get("HX-Request"):
        response = HttpResponse(status=204)
        response["HX-Redirect"] = target
        return response
    return redirect(target)
