from __future__ import annotations

import functools
import json
import logging
from pathlib import Path

from django.contrib.auth.decorators import login_not_required
from django.contrib.staticfiles import finders
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import render
from django.templatetags.static import static
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST, require_safe
from kombu.exceptions import OperationalError

from hub.accounts.decorators import admin_required
from hub.health import healthz_details, may_see_details, run_checks, status_report
from hub.tasks import live_wire_ping

log = logging.getLogger(__name__)


@login_not_required
@never_cache
@require_GET
def healthz(request):
    """200 ``{"status": "ok"}`` or 503 ``{"status": "failing"}``; each check's detail only for those allowed."""
    checks = run_checks()
    healthy = all(check.ok for check in checks)
    body = {"status": "ok" if healthy else "failing"}
    if may_see_details(request):
        body |= {c.name: c.as_json() for c in checks}
        body["details"] = healthz_details()  # the version and the last backup (never make it fail)
    return JsonResponse(body, status=200 if healthy else 503)


@admin_required
@never_cache
@require_GET
def health_page(request):
    """The footer's health link: what /healthz checks, in words, plus the devices and the queue (admins only).

    /healthz stays the machines' JSON; this page is for a person deciding what to restart.
    """
    return render(request, "health.html", status_report())


@admin_required
@require_POST
def live_wire(request):
    """An admin's check of the live wire: ask a worker to answer over the websocket. 202 when queued; a clear message when it can't be."""
    try:
        live_wire_ping.delay(request.user.pk, timezone.now().isoformat())
    except OperationalError:
        log.warning("broker unreachable: live wire ping not queued")
        return render(request, "dashboard.html#live-wire", {"wire": {"error": True}}, status=503)
    return HttpResponse(status=202)


# -- icons: fetched by browsers and phones before anyone signs in ------------------------------------------
ICON_MAX_AGE = 24 * 3600  # a day: cacheable, yet a new icon shows up by tomorrow


@functools.cache
def _static_bytes(name: str) -> bytes:
    found = finders.find(name)
    if not found:
        raise Http404("No such icon.")
    return Path(found).read_bytes()


def _cacheable(response: HttpResponse) -> HttpResponse:
    response["Cache-Control"] = f"public, max-age={ICON_MAX_AGE}"
    response["X-Content-Type-Options"] = "nosniff"
    return response


@login_not_required
@require_safe
def favicon(request):
    """``/favicon.ico``: what browsers ask for on pages (or files) without a link tag."""
    return _cacheable(HttpResponse(_static_bytes("img/favicon.ico"), content_type="image/x-icon"))


@login_not_required
@require_safe
def manifest(request):
    """The web app manifest (static/manifest.webmanifest), its icons pointed at their collected static URLs."""
    data = json.loads(_static_bytes("manifest.webmanifest"))
    for icon in data.get("icons", []):
        icon["src"] = static(icon["src"])
    body = json.dumps(data, indent=2)
    return _cacheable(HttpResponse(body, content_type="application/manifest+json"))
