"""Images and speech wait for their turn and their result inside the HTTP call.

An async view reads the Job row every ``POLL_S`` (never the device, so a waiting caller adds no device requests) for
at most ``HUB_V1_WAIT_S``. Past that the answer is an error naming the job, to be fetched from the REST API later.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone

from hub.db import give_back
from hub.parsing import parse_int
from jobs.doors.v1.errors import V1Error
from jobs.doors.v1.fields import check_on, queue, rate_limit
from jobs.models import Job, JobState

POLL_S = 0.5  # how often a waiting images/speech call re-reads its Job row


def _job_row(pk: int) -> Job:
    job = Job.objects.select_related("device").get(pk=pk)
    give_back()  # read every POLL_S for minutes: no connection held between the reads
    return job


async def _tick() -> None:
    await asyncio.sleep(POLL_S)


async def wait_for(request: HttpRequest, job: Job) -> Job:
    """Read the Job row until it finishes (never the device); past HUB_V1_WAIT_S, an error naming the job."""
    deadline = time.monotonic() + float(settings.HUB_V1_WAIT_S)
    while True:
        job = await sync_to_async(_job_row)(job.pk)
        if job.state in (JobState.DONE, JobState.FAILED, JobState.CANCELLED):
            break
        if time.monotonic() >= deadline:
            url = request.build_absolute_uri(f"/api/jobs/{job.pk}")
            raise V1Error(
                504,
                f"Job {job.pk} is still {job.get_state_display().lower()} after {settings.HUB_V1_WAIT_S:g} s "
                f"(HUB_V1_WAIT_S); it stays queued. Fetch it later from {url} (and its files from "
                f"{url}/artifacts), or see it in your gallery.",
                type="timeout",
                code="wait_timeout",
                headers={"X-Hub-Job": str(job.pk)},
            )
        await _tick()
    if job.state == JobState.FAILED:
        raise V1Error(
            502,
            f"Job {job.pk} failed: {job.error_human or 'the device refused it.'}",
            type="server_error",
            code=job.error_code or "job_failed",
            headers={"X-Hub-Job": str(job.pk)},
        )
    if job.state == JobState.CANCELLED:
        raise V1Error(
            409,
            f"Job {job.pk} was cancelled. {job.cancel_reason}".strip(),
            code="job_cancelled",
            headers={"X-Hub-Job": str(job.pk)},
        )
    return job


def _twin(request: HttpRequest, device, checked) -> Job | None:
    """The job an SDK retry of this very request already queued (same person, kind, model and parameters).

    The SDK retries a call that timed out on its side (600 s by default) or got a 5xx; without this, each retry
    of a long wait would queue the same image again.
    """
    if parse_int(request.headers.get("x-stainless-retry-count"), 0, minimum=0) < 1:
        return None
    since = timezone.now() - dt.timedelta(seconds=float(settings.HUB_V1_WAIT_S) * 3 + 60)
    # A pool job may have moved to another lane since: any pool job of the person's is a candidate.
    where = {"pinned": False} if checked.pool else {"pinned": True, "device": device}
    candidates = Job.objects.filter(
        owner=request.user,
        **where,
        kind=checked.kind,
        model_id=checked.model_id,
        created__gte=since,
        hidden_at__isnull=True,
    ).exclude(state__in=(JobState.FAILED, JobState.CANCELLED))
    for job in candidates.order_by("-pk")[:20]:
        params = {k: v for k, v in job.params.items() if k != "files"}
        if params == checked.params:
            return job
    return None


def submit_for_wait(request: HttpRequest, kind: str, read) -> tuple[Job, dict[str, Any]]:
    """``read(request)``: (the device named or None for the pool, the fields per device, the answer's extras)."""
    named, build, extra = read(request)
    device, checked = check_on(request, named, kind, build)
    job = _twin(request, device, checked)
    if job is None:
        rate_limit(request)
        job = queue(request, device=device, checked=checked)
    return job, extra
