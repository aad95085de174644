"""The one module that pushes job and queue changes to open browsers (call after commit).

Rendering belongs to the UI (``jobs.fragments``: ``job_fragments(job) -> list[str]`` and
``queue_fragments(device) -> list[str]``, whole OOB elements). Until that module exists, or if it fails, pushes
are skipped: a live update is best effort and must never fail a job.
"""

from __future__ import annotations

import logging

from hub import live

logger = logging.getLogger("jobs.broadcast")


def _fragments_module():
    try:
        from jobs import fragments  # the UI engineer's module
    except ImportError:
        return None
    return fragments


def job_groups(job) -> list[str]:
    """Owner, the job's page, its device, admins; everyone too when the owner shared it."""
    groups = [
        live.user_group(job.owner_id),
        live.job_group(job.pk),
        live.device_group(job.device_id),
        live.ADMINS,
    ]
    if job.shared:
        groups.append(live.EVERYONE)
    return groups


def broadcast_job(job_id: int) -> None:
    from jobs.models import Job

    fragments = _fragments_module()
    if fragments is None or not hasattr(fragments, "job_fragments"):
        return
    job = Job.objects.select_related("owner", "device").filter(pk=job_id).first()
    if job is None:
        return
    try:
        html = fragments.job_fragments(job)
    except Exception:
        logger.exception("rendering job %s fragments failed", job_id)
        return
    for fragment in html:
        live.push_many(job_groups(job), fragment)


def broadcast_queue(device_id: int) -> None:
    from devices.models import Device

    fragments = _fragments_module()
    if fragments is None or not hasattr(fragments, "queue_fragments"):
        return
    device = Device.objects.filter(pk=device_id).first()
    if device is None:
        return
    try:
        html = fragments.queue_fragments(device)
    except Exception:
        logger.exception("rendering queue fragments for device %s failed", device_id)
        return
    for fragment in html:
        live.push_many([live.EVERYONE, live.device_group(device_id)], fragment)
