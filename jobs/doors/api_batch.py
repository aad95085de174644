"""REST routes for batches: ``POST /api/jobs/batch``, ``GET /api/batches/{id}``, ``POST /api/batches/{id}/cancel``.

A batch's members are ``POST /api/jobs`` bodies, each read exactly as that route reads one (``submission_of``);
``jobs.queue.batches.batch_submit`` admits them together, all or nothing. A refusal is the API's usual 422, each
refused member's fields named by its index: ``{"detail": …, "errors": {"jobs[2].size": […], "jobs[4]": […]}}``.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest
from ninja import Router
from ninja.responses import Status

from hub.api_auth import require_scope
from hub.ratelimit import check_submit
from jobs.core.selectors import jobs_visible_to
from jobs.doors.api import READ, SUBMIT, SUBMIT_ERRORS, _typed, job_detail_out, read_body, submission_of
from jobs.kinds.schemas import BatchOut, CancelIn
from jobs.queue.admission import RequestInvalid
from jobs.queue.batches import (
    MAX_BATCH,
    BatchInvalid,
    Member,
    batch_cancel,
    batch_counts,
    batch_submit,
    too_big,
)

router = Router(tags=["jobs"])

_BATCH_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "jobs": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": MAX_BATCH,
                            "items": {"type": "object", "additionalProperties": True},
                            "description": "Each a `POST /api/jobs` JSON body (`kind`, `device`, the kind's fields).",
                        }
                    },
                    "required": ["jobs"],
                    "additionalProperties": False,
                }
            }
        },
    }
}


def batch_out(request: HttpRequest, batch: str, jobs: list[Any], *, ready_at: Any = None) -> dict[str, Any]:
    counts = batch_counts([batch]).get(batch)
    return {
        "batch": batch,
        "summary": counts.text if counts else "",
        "estimate_ready_at": ready_at,
        "jobs": [job_detail_out(request, job) for job in jobs],
    }


def _members(data: dict[str, Any]) -> list[dict[str, Any]]:
    extra = sorted(k for k in data if k != "jobs")
    if extra:
        raise RequestInvalid({name: ['Unknown field; a batch is {"jobs": [<job>, …]}.'] for name in extra})
    members = data.get("jobs")
    if not isinstance(members, list):
        raise RequestInvalid({"jobs": ["Give the jobs as a list of job bodies, as POST /api/jobs takes."]})
    if why := too_big(len(members)):
        raise RequestInvalid({"jobs": [why]})
    bad = {
        f"jobs[{i}]": ["Each job is a JSON object."] for i, m in enumerate(members) if not isinstance(m, dict)
    }
    if bad:
        raise RequestInvalid(bad)
    return members


def _by_index(exc: BatchInvalid) -> RequestInvalid:
    errors: dict[str, list[str]] = {}
    for index in sorted(exc.errors):
        for name, messages in exc.errors[index].errors.items():
            errors[f"jobs[{index}]" if name == "__all__" else f"jobs[{index}].{name}"] = messages
    return RequestInvalid(errors)


@router.post(
    "/jobs/batch",
    url_name="batch_submit",
    response={201: BatchOut, 200: BatchOut, **SUBMIT_ERRORS},
    openapi_extra=_BATCH_BODY,
    summary="Submit a batch of jobs",
)
def submit_batch(request: HttpRequest):
    """Queue several jobs at once, all or nothing: `{"jobs": [<job body>, …]}`, each as `POST /api/jobs` takes it
    (JSON only; at most 50).

    They are admitted together: the quotas count the whole batch, each job's expected times count the ones
    before it, and jobs for any device spread over the pool. If any job is refused, nothing is queued: a 422
    names each refused job by its index and field (`"jobs[2].size"`, or `"jobs[2]"` for the job as a whole).
    With an `Idempotency-Key` header, the same key again answers 200 with the batch it queued."""
    require_scope(request, SUBMIT)
    check_submit(request)
    data, _files = read_body(request, files_allowed=False)
    members = _members(data)
    key = (request.headers.get("Idempotency-Key") or "").strip()[:200] or None

    def member(body: dict[str, Any]) -> Member:
        try:
            return submission_of(request, body, {})
        except RequestInvalid as exc:
            return exc

    try:
        jobs = batch_submit(owner=request.user, members=[member(m) for m in members], idempotency_key=key)
    except BatchInvalid as exc:
        raise _by_index(exc) from None
    replay = getattr(jobs[0], "idempotent_replay", False)
    ready = max((j.admission.ready_at for j in jobs if getattr(j, "admission", None) and j.admission.ready_at),
                default=None)  # fmt: skip
    return Status(200 if replay else 201, batch_out(request, jobs[0].batch, jobs, ready_at=ready))


def _batch(request: HttpRequest, batch_id: str) -> list[Any]:
    """The batch's jobs ``request.user`` may see (404 when none: no existence leak)."""
    jobs = list(jobs_visible_to(request.user).filter(batch=batch_id[:32]).order_by("pk")) if batch_id else []
    if not jobs:
        raise Http404("No such batch.")
    return jobs


@router.get("/batches/{batch_id}", url_name="batch_get", response={200: BatchOut, **SUBMIT_ERRORS},
            summary="Get a batch")  # fmt: skip
def batch_get(request: HttpRequest, batch_id: str):
    """The batch's jobs (those you may see) and how far it is."""
    require_scope(request, READ)
    return batch_out(request, batch_id, _batch(request, batch_id))


@router.post(
    "/batches/{batch_id}/cancel",
    url_name="batch_cancel",
    response={200: BatchOut, **SUBMIT_ERRORS},
    openapi_extra={
        "requestBody": {
            "required": False,
            "content": {"application/json": {"schema": CancelIn.model_json_schema()}},
        }
    },
    summary="Cancel a batch",
)
def batch_cancel_route(request: HttpRequest, batch_id: str):
    """Cancel every job of the batch still waiting or running (yours; admins: anyone's). Body optional:
    `{"reason": "…"}`."""
    require_scope(request, SUBMIT)
    _batch(request, batch_id)
    data, _ = read_body(request, files_allowed=False)
    payload = _typed(CancelIn, data)
    reason = " ".join(str(payload.get("reason") or "").split())[:300]
    batch_cancel(batch=batch_id[:32], by=request.user, reason=reason)
    return batch_out(request, batch_id, _batch(request, batch_id))
