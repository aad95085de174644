"""The one module that pushes job and queue changes to open browsers (call after commit).

Rendering lives in ``jobs.fragments``; this module decides who receives what:

- a job's own fragments (prompt, parameters, events, results) go only to people who may view the job:
  ``job.<id>`` (its page; the topic handler checks access), ``user.<owner>``, ``admins`` and, when shared,
  ``everyone``. Never ``device.<id>``: anyone signed in may join a device's group. They also carry their
  *audience* (owner, admins, everyone when shared): each socket checks it on arrival, so a member who joined
  ``job.<id>`` while the job was shared gets nothing once it is private — whatever the group, whenever the
  change — and their socket then leaves the group (``hub.consumers``). No extra call is needed when
  ``shared`` changes: the change's own broadcast carries the new audience.
- the device's running-now card and the queue plan are safe for everyone (private jobs appear without their
  prompt): ``everyone`` and ``device.<id>``. The admins' queue controls (with prompts) go to ``admins`` only,
  with ``admins`` as their audience (a socket demoted a moment ago drops them).

A live update is best effort: a rendering or Redis failure is logged and never fails a job.
"""

from __future__ import annotations

import logging

from hub import live

logger = logging.getLogger("jobs.broadcast")


def job_audience(job) -> list[str]:
    """The identity groups that may see a job's full fragments (``jobs.selectors.can_view`` as groups)."""
    audience = [live.user_group(job.owner_id), live.ADMINS]
    if job.shared:
        audience.append(live.EVERYONE)
    return audience


def job_groups(job) -> list[str]:
    """The groups a job's full fragments are sent to: its page, and everyone in its audience."""
    return [live.job_group(job.pk), *job_audience(job)]


def public_groups(device_id: int) -> list[str]:
    return [live.EVERYONE, live.device_group(device_id)]


def broadcast_job(job_id: int) -> None:
    from jobs import fragments

    try:
        job = fragments.job_with_related(job_id)
        if job is None:
            return
        private = fragments.job_fragments(job)
        running = fragments.running_fragment(job.device)
    except Exception:
        logger.exception("rendering job %s fragments failed", job_id)
        return
    audience = job_audience(job)
    for html in private:
        live.push_many(job_groups(job), html, audience=audience)
    live.push_many(public_groups(job.device_id), running)


def broadcast_queue(device_id: int) -> None:
    from devices.models import Device
    from jobs import fragments

    try:
        device = Device.objects.filter(pk=device_id).first()
        if device is None:
            return
        public = fragments.queue_fragments(device)
        admin = fragments.queue_admin_fragments(device)
    except Exception:
        logger.exception("rendering queue fragments for device %s failed", device_id)
        return
    for html in public:
        live.push_many(public_groups(device_id), html)
    for html in admin:
        live.push(live.ADMINS, html, audience=[live.ADMINS])
