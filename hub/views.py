from __future__ import annotations

import logging

from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST
from kombu.exceptions import OperationalError

from hub.health import run_checks
from hub.tasks import live_wire_ping
from jobs.pages import dashboard_context

log = logging.getLogger(__name__)


@login_not_required
@never_cache
@require_GET
def healthz(request):
    checks = run_checks()
    healthy = all(check.ok for check in checks)
    body = {"status": "ok" if healthy else "failing", **{c.name: c.as_json() for c in checks}}
    return JsonResponse(body, status=200 if healthy else 503)


@require_GET
def dashboard(request):
    """Devices (state, gauges, last hour), what runs now, tonight's plan, and my recent jobs."""
    return render(request, "dashboard.html", dashboard_context(request.user))


@require_POST
def live_wire(request):
    """Ask a worker to answer over the websocket. 202 when queued; a clear message when it can't be."""
    try:
        live_wire_ping.delay(request.user.pk, timezone.now().isoformat())
    except OperationalError:
        log.warning("broker unreachable: live wire ping not queued")
        return render(request, "dashboard.html#live-wire", {"wire": {"error": True}}, status=503)
    return HttpResponse(status=202)
