"""Websocket topics for job pages and queues (registered in ``JobsConfig.ready``).

- ``job:<id>``: the job's page. Only people who may view the job join ``job.<id>``; the snapshot is the
  job's current fragments, so a reload or reconnect shows the truth at once. The check is repeated whenever
  access may have changed (``hub.consumers``): a job made private stops reaching the people who watched it.
- ``queue:<device_id>``: the plan and the running-now card (both safe for everyone; they arrive through
  ``everyone`` and the device's group, which anyone signed in may join); admins also get their control list.
- ``mine:<user_id>``: the dashboard's "my recent jobs" rows (only your own id is accepted).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.template.loader import render_to_string

from devices.models import Device
from hub import live
from jobs import fragments
from jobs.models import ACTIVE_STATES, WAITING_STATES, Job
from jobs.selectors import job_for


def job_topic(user: Any, object_id: str) -> tuple[list[str], list[str]]:
    if not getattr(user, "is_authenticated", False):
        raise PermissionDenied
    try:
        job = job_for(user, object_id)
    except Http404:  # not an ObjectDoesNotExist: the consumer only expects refusals it knows
        raise PermissionDenied from None
    return [live.job_group(job.pk)], fragments.job_fragments(fragments.job_with_related(job.pk))


def queue_topic(user: Any, object_id: str) -> tuple[list[str], list[str]]:
    if not getattr(user, "is_authenticated", False):
        raise PermissionDenied
    device = Device.objects.get(pk=int(object_id))
    snapshot = fragments.queue_fragments(device)
    if getattr(user, "is_admin", False):
        snapshot += fragments.queue_admin_fragments(device)
    # The device's group too: progress ticks reach the running-now card through it (see job_fragments).
    return [live.EVERYONE, live.device_group(device.pk)], snapshot


def mine_topic(user: Any, object_id: str) -> tuple[list[str], list[str]]:
    if not getattr(user, "is_authenticated", False) or str(user.pk) != object_id:
        raise PermissionDenied
    jobs = Job.objects.filter(owner=user, state__in=[*WAITING_STATES, *ACTIVE_STATES]).select_related(
        "owner", "device"
    )[:10]
    rows = [
        render_to_string(
            f"{fragments.PARTS}#job-row", {"job": j, "title": fragments.job_title(j), "oob": True}
        )
        for j in jobs
    ]
    return [live.user_group(user.pk)], rows
