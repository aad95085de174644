"""The one module that pushes job and queue changes to open browsers. Only the outbox calls it (``jobs.live.outbox``:
transition -> outbox -> pages/pushes/notifications), after commit: a state change, an event, a progress tick or a
queue change.

Rendering lives in ``jobs.live.fragments``; this module decides who receives what. Every fragment goes to the
topic group of the elements it replaces (``hub.live``), so a page gets only what it shows:

- a job's page (``job.<id>``): status, events, result, actions, header badge. They carry the job's
  *audience* (owner, admins, everyone when shared): each socket checks it on arrival, so a member who joined
  while the job was shared gets nothing once it is private, and then leaves the group (``hub.consumers``).
  The actions box goes out once per kind of viewer (owner and admins with the buttons), each marked as a
  *variant* so not getting another person's version says nothing about access.
- the owner's dashboard list (``mine.<owner>``): the whole list when the jobs on it changed, else one row.
- the device's running-now card and the plan (``queue.<device>``; topics ``plan:`` and ``queue:``) go out in
  versions (:func:`plan_variants`): each person with a private job waiting or running there gets theirs
  (their own entries by their prompt, audience ``user.<id>``), admins theirs (every prompt, the memory
  summaries), and everyone else one without private prompts that excludes those people, so no socket ever
  holds another person's prompt. The admins' controls (``control.<device>``, joined by admins watching
  ``queue:``) carry ``admins`` as their audience.

Quiet by construction: topics nobody watches are not even rendered, ``hub.live.push`` skips a fragment
identical to the last one the group got, and a progress tick sends each element at most about once a second
(a state change always goes out). A finished job's result (its player) goes out once, with the move to done,
and never again: later pushes update only what is around it.

A live update is best effort: a rendering or Redis failure is logged and never fails a job.
"""

from __future__ import annotations

import logging

from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.template.loader import render_to_string

from devices.models import Device
from hub import live
from jobs.core.albums import album_viewer_ids
from jobs.live import fragments
from jobs.models import ACTIVE_STATES, PENDING_STATES, Album, AlbumMember, Job

logger = logging.getLogger("jobs.live.broadcast")


def job_audience(job) -> list[str]:
    """The identity groups that may see a job's full fragments (``jobs.core.selectors.can_view`` as groups)."""
    audience = [live.user_group(job.owner_id), live.ADMINS]
    if job.shared:
        audience.append(live.EVERYONE)
    elif job.is_final:
        # The people of an album its owner put it in (only a finished job is ever in one): someone removed from
        # the album drops out here, and their socket re-checks its topics on the next push.
        audience += [live.user_group(pk) for pk in sorted(album_viewer_ids(job) - {job.owner_id})]
    return audience


def broadcast_job(job_id: int, *, tick: bool = False, entered: str | None = None) -> None:
    """Push one job's elements. ``tick``: only progress moved (status, row, running card; throttled).
    ``entered``: the state it just moved to, if any (the move to done brings the result's player)."""
    try:
        job = fragments.job_with_related(job_id)
        if job is None:
            return
        watching = live.watched(
            [f"job:{job.pk}", f"mine:{job.owner_id}", f"plan:{job.device_id}", f"queue:{job.device_id}"]
        )
        _job_page(job, watching, tick=tick, entered=entered)
        _owner_list(job, watching, tick=tick)
        if tick:  # a state change sends the whole queue (broadcast_queue), the running card with it
            _running(job.device, watching, tick=True)
    except Exception:
        logger.exception("pushing job %s failed", job_id)


def _job_page(job, watching: set[str], *, tick: bool, entered: str | None) -> None:
    if f"job:{job.pk}" not in watching:
        return
    group, audience = live.job_group(job.pk), job_audience(job)
    ctx = fragments.job_context(job, oob=True)
    every = live.TICK_EVERY_S if tick else 0.0
    live.push(group, fragments.render_status(job, ctx=ctx), audience=audience, every=every)
    if tick:
        return
    live.push(group, fragments.render_privacy(job), audience=audience)
    live.push(group, fragments.render_plan_line(job), audience=audience)
    live.push(group, fragments.render_events(ctx), audience=audience)
    if not fragments.has_player(job) or entered == job.state:
        live.push(group, fragments.render_result(ctx), audience=audience)
    for html, variant_audience, exclude in fragments.actions_variants(job):
        live.push(group, html, audience=variant_audience, exclude=exclude, variant=True)


def _owner_list(job, watching: set[str], *, tick: bool) -> None:
    if f"mine:{job.owner_id}" not in watching:
        return
    group, audience = live.mine_group(job.owner_id), [live.user_group(job.owner_id)]
    recent = fragments.recent_jobs(job.owner_id)
    if not tick and _list_changed(job.owner_id, recent):  # a job joined the list: the whole list, once
        live.push(group, fragments.render_my_jobs(job.owner, jobs=recent), audience=audience)
    elif any(j.pk == job.pk for j in recent):  # the row is on the list: only it moved
        every = live.TICK_EVERY_S if tick else 0.0
        live.push(group, fragments.render_job_row(job), audience=audience, every=every)


def _list_changed(owner_id: int, recent) -> bool:
    """Which jobs the owner's list holds changed since it was last sent (the rows themselves move by row)."""
    key, ids = f"live:mine-ids:{owner_id}", ",".join(str(j.pk) for j in recent)
    try:
        if cache.get(key) == ids:
            return False
        cache.set(key, ids, timeout=24 * 3600)
    except Exception:  # noqa: BLE001 - no cache: send the list (best effort)
        pass
    return True


def _running(device, watching: set[str], *, tick: bool) -> None:
    """The running-now card, on a tick. (The admins' control list, ~4 KB with its buttons, follows state
    changes only: the running card beside it on the queue page shows the moving bar.)"""
    every = live.TICK_EVERY_S if tick else 0.0
    if watching & {f"plan:{device.pk}", f"queue:{device.pk}"}:
        variants = plan_variants(device)
        cards = fragments.running_fragment(device, viewers=[v.viewer for v in variants])
        for variant, html in zip(variants, cards, strict=True):
            variant.push(live.queue_group(device.pk), html, every=every)


class PlanVariant:
    """One version of the running card and the plan: whom it is rendered for and which sockets get it."""

    def __init__(self, viewer, *, audience: list[str] | None = None, exclude: list[str] | None = None):
        self.viewer, self.audience, self.exclude = viewer, audience, exclude

    def push(self, group: str, html: str, *, every: float = 0.0) -> None:
        # One of several versions: a socket outside this one's audience drops it quietly (no re-check).
        split = self.audience is not None or bool(self.exclude)
        live.push(group, html, audience=self.audience, exclude=self.exclude, variant=split, every=every)


class _AnyAdmin:
    """Renders the admins' version: what every admin may see (``jobs.core.selectors.plan_shows_prompt``)."""

    is_authenticated = is_active = is_admin = can_submit = True
    pk = None


def plan_variants(device) -> list[PlanVariant]:
    """The versions of a device's running card and plan, ``[everyone else, admins, each owner]``.

    One version for everyone while nothing in it is private or for admins only. Otherwise everyone else's
    excludes admins and every person with a private job waiting or running on the device, who each get their
    own. When that set of people changes, the group's "already sent" memory is reset first: the public
    version's exclusions changed, so no fragment may be skipped as identical to one sent to other sockets.
    """
    private = list(
        get_user_model()
        .objects.filter(
            jobs__device_id=device.pk,
            jobs__state__in=PENDING_STATES + ACTIVE_STATES,
            jobs__shared=False,
            jobs__hidden_at__isnull=True,
        )
        .distinct()
        .order_by("pk")
    )
    owners = [u for u in private if not u.is_admin]  # admins get the admins' version, which names every job
    split = bool(private) or fragments.summary_window(device) is not None
    _remember_split(device.pk, ",".join(str(u.pk) for u in owners) if split else "-")
    if not split:
        return [PlanVariant(None)]
    people = [live.user_group(u.pk) for u in owners]
    return [
        PlanVariant(None, exclude=[live.ADMINS, *people]),
        PlanVariant(_AnyAdmin(), audience=[live.ADMINS]),
        *(
            PlanVariant(u, audience=[group], exclude=[live.ADMINS])
            for u, group in zip(owners, people, strict=True)
        ),
    ]


def _remember_split(device_id: int, key: str) -> None:
    name = f"live:plan-split:{device_id}"
    try:
        if cache.get(name) == key:
            return
        cache.set(name, key, timeout=24 * 3600)
    except Exception:  # noqa: BLE001 - no cache: reset (best effort; at worst a fragment goes out again)
        pass
    live.forget_sent([live.queue_group(device_id)])


def broadcast_queue(device_id: int) -> None:
    """Push one device's queue: the running-now card and the plan (in versions, ``plan_variants``), the
    controls (admins)."""
    try:
        device = Device.objects.filter(pk=device_id).first()
        if device is None:
            return
        watching = live.watched([f"plan:{device_id}", f"queue:{device_id}"])
        if watching:
            variants = plan_variants(device)
            rendered = fragments.queue_fragments_for(device, [v.viewer for v in variants])
            for variant, parts in zip(variants, rendered, strict=True):
                for html in parts:
                    variant.push(live.queue_group(device_id), html)
        if f"queue:{device_id}" in watching:  # the queue page, where admins have their controls
            for html in fragments.queue_admin_fragments(device):
                live.push(live.control_group(device_id), html, audience=[live.ADMINS])
        _plan_lines(device_id)
    except Exception:
        logger.exception("pushing the queue of device %s failed", device_id)


#: The waiting jobs of a lane whose open pages are looked for on a queue change (one cache round trip).
PLAN_LINE_PAGES = 500


def _plan_lines(device_id: int) -> None:
    """The plan line of each waiting job of the lane whose page is open (``job:<id>``): a replan moves its times,
    the pool moves it to this lane (its old lane's push no longer lists it; this one does)."""
    waiting = list(
        Job.objects.filter(device_id=device_id, state__in=PENDING_STATES)
        .order_by()
        .values_list("pk", flat=True)[:PLAN_LINE_PAGES]
    )
    open_pages = live.watched(f"job:{pk}" for pk in waiting) if waiting else set()
    if not open_pages:
        return
    ids = [pk for pk in waiting if f"job:{pk}" in open_pages]
    for job in Job.objects.filter(pk__in=ids).select_related("owner", "device").order_by("pk"):
        live.push(live.job_group(job.pk), fragments.render_plan_line(job), audience=job_audience(job))


def broadcast_album_news(album_id: int, by_id: int) -> None:
    """Tell an album's open pages that results were added (a notice with a link to show them, never the results
    themselves: the page draws them through its own access check). Only the album's people, as they are now."""
    try:
        if f"album:{album_id}" not in live.watched([f"album:{album_id}"]):
            return
        album = Album.objects.filter(pk=album_id).select_related("owner").first()
        if album is None:
            return
        people = [album.owner_id, *AlbumMember.objects.filter(album=album).values_list("user_id", flat=True)]
        by = get_user_model().objects.filter(pk=by_id).first()
        html = render_to_string(
            "jobs/album.html#album-news", {"album": album, "by": by, "news": True, "oob": True}
        )
        live.push(
            live.topic_group(f"album:{album_id}"), html, audience=[live.user_group(pk) for pk in people]
        )
    except Exception:
        logger.exception("telling album %s's pages of new results failed", album_id)
