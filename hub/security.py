"""Response headers every page gets: Permissions-Policy, and no caching of what a signed-in person sees.

The Content-Security-Policy itself comes from django-csp (CONTENT_SECURITY_POLICY in hub.settings), with this
host's websocket addresses added to each answer's ``connect-src`` (:class:`CSPMiddleware`).
"""

from __future__ import annotations

from csp.middleware import CSPMiddleware as DjangoCSPMiddleware
from csp.middleware import PolicyParts
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponseBase
from django.utils.cache import patch_vary_headers
from django.utils.deprecation import MiddlewareMixin

# Powerful features the hub never uses, refused for the page and anything it might embed. (Notifications
# are not a Permissions-Policy feature; "Notify me" keeps working.) Only names Chromium and Firefox know:
# an unknown one makes the browser log an error on every page.
PERMISSIONS_POLICY = ", ".join(
    f"{feature}=()"
    for feature in (
        "accelerometer",
        "camera",
        "display-capture",
        "geolocation",
        "gyroscope",
        "magnetometer",
        "microphone",
        "midi",
        "payment",
        "usb",
    )
)

PRIVATE = "private, no-store"


class SecurityHeadersMiddleware(MiddlewareMixin):
    """Permissions-Policy on every response; ``Cache-Control: private, no-store`` for signed-in people.

    A page or htmx fragment rendered for a signed-in person holds their prompts and jobs: no shared
    cache may keep it, and the browser should not keep it on disk or show it again from history after
    they sign out. A view that chose its own caching keeps it: result files revalidate
    (``private, no-cache`` with an ETag, jobs.files.downloads), icons are public. Static files never get here
    (WhiteNoise answers them earlier in MIDDLEWARE).
    """

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        response.headers.setdefault("Permissions-Policy", PERMISSIONS_POLICY)
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and "Cache-Control" not in response:
            response["Cache-Control"] = PRIVATE
            patch_vary_headers(response, ("Cookie",))
        return response


def socket_sources(request: HttpRequest) -> list[str]:
    """``ws://`` and ``wss://`` of the host the page was asked from: the live socket's address and no other.

    CSP3's ``'self'`` covers them in Chromium and Firefox; WebKit before 2022 (Safari 15.4 and older, still on
    some household iPads) does not, and ``ws: wss:`` would let a page's script talk to any host. The host is
    Django's checked one (``ALLOWED_HOSTS``); a request with a host Django refuses gets no socket source (its
    answer is an error page)."""
    try:
        host = request.get_host()
    except DisallowedHost:
        return []
    return [f"ws://{host}", f"wss://{host}"]


class CSPMiddleware(DjangoCSPMiddleware):
    """django-csp's, with :func:`socket_sources` added to ``connect-src``."""

    def get_policy_parts(
        self, request: HttpRequest, response: HttpResponseBase, report_only: bool = False
    ) -> PolicyParts:
        parts = super().get_policy_parts(request, response, report_only=report_only)
        sources = socket_sources(request)
        if sources and not report_only:
            update = dict(parts.update or {})
            connect = update.get("connect-src") or []
            update["connect-src"] = [*([connect] if isinstance(connect, str) else connect), *sources]
            parts.update = update
        return parts
