from __future__ import annotations

import logging

from celery import shared_task
from django.template.loader import render_to_string
from django.utils import timezone

from hub import live
from hub.accounts import audit

log = logging.getLogger(__name__)


@shared_task
def beat_alive() -> None:
    """Proves the beat -> broker -> worker path end to end; /healthz reads the marks it leaves."""
    log.debug("beat alive at %s", timezone.now().isoformat())


@shared_task
def audit_prune() -> int:
    """Drop audit entries older than HUB_AUDIT_DAYS (daily, from beat)."""
    return audit.prune()


@shared_task
def live_wire_ping(user_id: int, requested_at: str) -> None:
    """Render the dashboard's live-wire element in a worker and push it to the person's sockets."""
    html = render_to_string(
        "dashboard.html#live-wire",
        {"wire": {"requested_at": requested_at, "answered_at": timezone.now()}, "oob": True},
    )
    live.push(live.wire_group(user_id), html)  # the dashboards that show the check (watch=wire:<id>)
