"""The Trash page (``/jobs/trash/``): a person's deleted results, with thumbnails and days left; restore, delete
for good (after a confirmation) and empty the trash. Rules live in ``jobs.queue.trash``; these views check
access (a job not theirs, or not in the trash, is a 404) and call it."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import Prefetch, Sum
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from jobs.files.downloads import artifact_response
from jobs.models import Artifact
from jobs.queue import trash
from jobs.quotas import services as quotas

PER_PAGE = 24


@require_GET
def trash_page(request: HttpRequest) -> HttpResponse:
    user = request.user
    jobs = trash.trash_of(user).prefetch_related(
        Prefetch("artifacts", queryset=Artifact.objects.filter(kind=Artifact.Kind.THUMB), to_attr="thumbs")
    )
    page = Paginator(jobs, PER_PAGE).get_page(request.GET.get("page"))
    now = timezone.now()
    rows: list[dict[str, Any]] = []
    sizes = dict(
        Artifact.objects.filter(job_id__in=[j.pk for j in page.object_list])
        .values("job_id")
        .annotate(b=Sum("bytes"))
        .values_list("job_id", "b")
    )
    for job in page.object_list:
        thumb = job.thumbs[0] if job.thumbs else None
        rows.append(
            {
                "job": job,
                "thumb_url": reverse("jobs-trash-thumb", args=[job.pk, thumb.pk]) if thumb else "",
                "days_left": trash.days_left(job, now=now),
                "purge_at": trash.purge_at(job),
                "bytes": sizes.get(job.pk) or 0,
            }
        )
    limits, usage = quotas.limits_for(user), quotas.usage_for(user, now=now)
    ctx = {
        "page": page,
        "rows": rows,
        "trash_days": trash.trash_days(),
        "usage": usage,
        "limits": limits,
    }
    return render(request, "jobs/trash.html", ctx)


@require_GET
def trash_thumb(request: HttpRequest, job_id: int, artifact_id: int) -> HttpResponse:
    job = trash.trashed_job_for(request.user, job_id)
    artifact = job.artifacts.select_related("job").filter(pk=artifact_id).first()
    if artifact is None:
        raise Http404("No such file.")
    return artifact_response(request, artifact, inline=True, access_checked=True)


@require_POST
def trash_restore(request: HttpRequest, job_id: int) -> HttpResponse:
    job = trash.trashed_job_for(request.user, job_id)
    trash.trash_restore(job=job, by=request.user)
    messages.success(request, f"Restored {job}.")
    return redirect(reverse("jobs-trash"))


@require_http_methods(["GET", "POST"])
def trash_purge(request: HttpRequest, job_id: int) -> HttpResponse:
    """GET: the confirmation; POST: remove its files for good."""
    job = trash.trashed_job_for(request.user, job_id)
    if request.method == "POST":
        try:
            freed = trash.trash_purge(job=job, by=request.user)
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        else:
            messages.success(request, f"Deleted {job} for good: {freed / quotas.MB:.1f} MB freed.")
        return redirect(reverse("jobs-trash"))
    files = list(job.artifacts.order_by("id"))
    ctx = {"job": job, "files": files, "total": sum(a.bytes for a in files)}
    return render(request, "jobs/trash_purge.html", ctx)


@require_http_methods(["GET", "POST"])
def trash_empty(request: HttpRequest) -> HttpResponse:
    """GET: the confirmation; POST: remove everything in the person's own trash for good."""
    if request.method == "POST":
        done = trash.trash_empty(user=request.user)
        if done.jobs:
            messages.success(
                request,
                f"Emptied the trash: {done.jobs} job{'s' if done.jobs != 1 else ''}, "
                f"{done.bytes / quotas.MB:.1f} MB freed.",
            )
        else:
            messages.info(request, "The trash was already empty.")
        return redirect(reverse("jobs-trash"))
    ctx = {"count": trash.trash_of(request.user).count(), "bytes": trash.trash_bytes(request.user)}
    return render(request, "jobs/trash_empty.html", ctx)
