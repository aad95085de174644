"""Websocket topics for job pages and queues (registered in ``JobsConfig.ready``).

Each topic names the elements a page shows (``hub.live``), and its snapshot is exactly those elements, as the
person watching may see them:

- ``job:<id>``: the job's page (status, events, result, actions, header badge). Only people who may view the
  job join ``job.<id>``; the check is repeated whenever access may have changed (``hub.consumers``): a job
  made private stops reaching the people who watched it. The snapshot leaves out a finished job's result
  (its player is on the page already and is never replaced: ``jobs.live.broadcast``).
- ``plan:<device_id>``: the running-now card and the plan as the person watching may see them: their own
  entries by their prompt, other people's private ones as "Video by mia" (dashboard, new-job page). Pushes
  send each person their version (``jobs.live.broadcast.plan_variants``).
- ``queue:<device_id>``: the queue page: the same, plus the admins' control list for admins.
- ``mine:<user_id>``: the dashboard's "my recent jobs" list (only your own id is accepted).
- ``album:<id>``: an album's page, told when results are added (``jobs.live.broadcast.broadcast_album_news``):
  only the album's people join ``album.<id>``; someone removed leaves it when their socket re-checks.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.template.loader import render_to_string

from devices.models import Device
from hub import live
from jobs.core.albums import album_for
from jobs.core.selectors import job_for
from jobs.live import fragments


def _signed_in(user: Any) -> None:
    if not getattr(user, "is_authenticated", False):
        raise PermissionDenied


def job_topic(user: Any, object_id: str) -> tuple[list[str], list[str]]:
    _signed_in(user)
    try:
        job = job_for(user, object_id)
    except Http404:  # not an ObjectDoesNotExist: the consumer only expects refusals it knows
        raise PermissionDenied from None
    job = fragments.job_with_related(job.pk)
    return [live.job_group(job.pk)], fragments.job_page_fragments(job, viewer=user, with_player=False)


def plan_topic(user: Any, object_id: str) -> tuple[list[str], list[str]]:
    _signed_in(user)
    device = Device.objects.get(pk=int(object_id))
    return [live.queue_group(device.pk)], fragments.queue_fragments(device, viewer=user)


def queue_topic(user: Any, object_id: str) -> tuple[list[str], list[str]]:
    """The plan for everyone; admins also join the controls' group (left again the moment they are not)."""
    groups, snapshot = plan_topic(user, object_id)
    if getattr(user, "is_admin", False):
        groups.append(live.control_group(int(object_id)))
        snapshot += fragments.queue_admin_fragments(Device.objects.get(pk=int(object_id)))
    return groups, snapshot


def mine_topic(user: Any, object_id: str) -> tuple[list[str], list[str]]:
    _signed_in(user)
    if str(user.pk) != object_id:
        raise PermissionDenied
    return [live.mine_group(user.pk)], [fragments.render_my_jobs(user)]


def album_topic(user: Any, object_id: str) -> tuple[list[str], list[str]]:
    """The album's page: its people only. The snapshot is the notice of new results, empty: the page was drawn
    with the album as it is."""
    _signed_in(user)
    try:
        album = album_for(user, int(object_id))
    except Http404:
        raise PermissionDenied from None
    empty = render_to_string("jobs/album.html#album-news", {"album": album, "oob": True})
    return [live.topic_group(f"album:{album.pk}")], [empty]
