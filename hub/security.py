"""Response headers every page gets: Permissions-Policy, and no caching of what a signed-in person sees.

The Content-Security-Policy itself comes from django-csp (CONTENT_SECURITY_POLICY in hub.settings).
"""

from __future__ import annotations

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
