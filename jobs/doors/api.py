"""REST routes for jobs (``/api/jobs``); the queue's plan and controls are in ``jobs.doors.api_queue``.

Thin, like the pages: an access-checking selector first (``jobs_visible_to`` / ``job_for``: no existence
leak), the request validated by the same form the page uses (``jobs.queue.admission``), one service call. Scopes:
GET needs ``read``, POST needs ``submit``; anything that queues a job also passes the rate limit.
Errors are turned into JSON by the handlers in ``hub.api``.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db.models import Prefetch, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import reverse
from ninja import Field, Query, Router, Schema
from ninja.errors import HttpError
from ninja.responses import Status
from pydantic import ValidationError as PydanticValidationError

from devices.models import Device
from hub.api_auth import require_scope
from hub.api_errors import ERRORS, ErrorOut
from hub.cursors import decode_cursor, encode_cursor
from hub.parsing import parse_id
from hub.ratelimit import check_submit
from jobs.core.links import Link
from jobs.core.selectors import job_for, job_links, jobs_visible_to
from jobs.doors.chaining import result_refs
from jobs.doors.filters import (
    STATE_GROUPS,
    SelectionInvalid,
    jobs_to_download,
    prompt_search,
)
from jobs.doors.intake import (
    ANY_DEVICE,
    find_device,
    form_for,
    with_defaults,
)
from jobs.files.downloads import artifact_response
from jobs.files.zips import NothingToDownload, TooManyJobs, stream_jobs_zip
from jobs.kinds.schemas import (
    FILE_FIELDS,
    CancelIn,
    JobDetailOut,
    JobListOut,
    ShareIn,
    SubmittedOut,
    submit_body_openapi,
)
from jobs.kinds.table import api_schemas, file_fields_of, form_class_for, schema_for
from jobs.live.fragments import eta_for
from jobs.models import Artifact, Job, JobEvent, JobKind, JobState
from jobs.queue import services, trash
from jobs.queue.admission import RequestInvalid
from jobs.queue.presets import with_preset
from jobs.queue.submission import Submission
from jobs.queue.submission import submit as submit_submission

router = Router(tags=["jobs"])

READ, SUBMIT = "read", "submit"
SUBMIT_ERRORS = {**ERRORS, 415: ErrorOut, 429: ErrorOut}
EVENTS_SHOWN = 200


# Ids go through hub.parsing.parse_id: int() would accept "²", " 12" or "١٢", and a 10,000-digit id must not
# reach the database (SQLite raises OverflowError past 2**63).
def _job(request: HttpRequest, job_id: str) -> Job:
    pk = parse_id(job_id)
    if pk is None:
        raise Http404("No such job.")
    return job_for(request.user, pk)


def _job_or_trashed(request: HttpRequest, job_id: str) -> Job:
    """The job as ``_job`` finds it, or one of the person's own in the trash (deleting it again is no error)."""
    pk = parse_id(job_id)
    if pk is None:
        raise Http404("No such job.")
    try:
        return job_for(request.user, pk)
    except Http404:
        return trash.trashed_job_for(request.user, pk)


def _invalid(field: str, message: str) -> RequestInvalid:
    return RequestInvalid({field: [message]})


# -- output ---------------------------------------------------------------------------------------------------
def _abs(request: HttpRequest, path: str) -> str:
    return request.build_absolute_uri(path)


def _public_params(params: dict[str, Any]) -> dict[str, Any]:
    """The parameters as the job page shows them: stored input files by name, never a server path."""
    out = dict(params or {})
    if isinstance(out.get("files"), dict):
        out["files"] = {k: str(v).rsplit("/", 1)[-1] for k, v in out["files"].items()}
    return out


def job_out(request: HttpRequest, job: Job) -> dict[str, Any]:
    error = None
    if job.state in (JobState.FAILED, JobState.INTERRUPTED) and (job.error_code or job.error_human):
        error = {
            "code": job.error_code or "error",
            "message": job.error_human or "The device reported an error.",
            "detail": job.error_detail,
        }
    return {
        "id": job.pk,
        "kind": job.kind,
        "state": job.state,
        "state_label": job.get_state_display(),
        "device": job.device_id,
        "device_name": job.device.name,
        "pinned": job.pinned,
        "pool": list(job.pool) if not job.pinned else [job.device_id],
        "owner": job.owner.username,
        "model": job.model_id,
        "prompt": job.prompt,
        "params": _public_params(job.params),
        "when": job.when,
        "not_before": job.not_before,
        "polite": job.polite,
        "shared": job.shared,
        "progress": round(job.progress, 1),
        "phase": job.phase,
        "estimate_s": job.estimate_s,
        "predicted_start": job.predicted_start,
        "predicted_finish": job.predicted_finish,
        "created": job.created,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "error": error,
        "cancel_reason": job.cancel_reason,
        "batch": job.batch or None,
        "url": _abs(request, reverse("jobs-detail", args=[job.pk])),
        "api_url": _abs(request, reverse("api:job_get", args=[job.pk])),
    }


def job_detail_out(request: HttpRequest, job: Job) -> dict[str, Any]:
    job = (
        Job.objects.select_related("owner", "device")
        .prefetch_related(
            Prefetch("events", queryset=JobEvent.objects.order_by("seq")),
            Prefetch("artifacts", queryset=Artifact.objects.order_by("id")),
        )
        .get(pk=job.pk)
    )
    events = list(job.events.all())[-EVENTS_SHOWN:]
    return {
        **job_out(request, job),
        **links_out(request.user, job),
        "eta": eta_for(job),
        "events": [{"seq": e.seq, "at": e.at, "state": e.state, "message": e.message} for e in events],
        "artifacts": [
            {
                "id": a.pk,
                "kind": a.kind,
                "name": a.name,
                "mime": a.mime,
                "bytes": a.bytes,
                "sha256": a.sha256,
                "created": a.created,
                "download_url": _abs(request, reverse("api:job_artifact", args=[job.pk, a.pk])),
                "web_url": _abs(request, reverse("jobs-file", args=[job.pk, a.pk])),
            }
            for a in job.artifacts.all()
        ],
    }


def links_out(viewer: Any, job: Job) -> dict[str, list[dict[str, Any]]]:
    """``parents`` (the jobs whose results it takes as inputs) and ``children`` (those that take its results), each
    ``{"job", "field", "artifact", "released"}``, as ``viewer`` may see them (``jobs.core.selectors.job_links``)."""
    parents, children = job_links(viewer, job)

    def shown(links: list[Link]) -> list[dict[str, Any]]:
        return [
            {"job": link.job_id, "field": link.field, "artifact": link.artifact, "released": link.released}
            for link in links
        ]

    return {"parents": shown(parents), "children": shown(children)}


# -- reading a request body -------------------------------------------------------------------------------------
def _guard_size(request: HttpRequest) -> None:
    """Refuse a body over DATA_UPLOAD_MAX_MEMORY_SIZE before reading it (multipart files included: the
    forms accept at most 10 MB per file, so anything bigger is refused anyway, just later and at more cost)."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if limit is not None and length > limit:
        raise RequestDataTooBig("too big")


def read_body(request: HttpRequest, *, files_allowed: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The request's fields and files: a JSON object, or multipart/form-data (urlencoded too) with files."""
    _guard_size(request)
    ctype = (request.content_type or "").lower()
    if ctype in ("multipart/form-data", "application/x-www-form-urlencoded"):
        data: dict[str, Any] = {}
        for key in request.POST:
            values = request.POST.getlist(key)
            if len(values) > 1:
                raise _invalid(key, "Give this field once.")
            data[key] = values[0]
        files = {}
        for key in request.FILES:
            if len(request.FILES.getlist(key)) > 1:
                raise _invalid(key, "Give one file.")
            files[key] = request.FILES[key]
        if files and not files_allowed:
            raise _invalid(next(iter(files)), "This request takes no file.")
        return data, files
    if ctype not in ("application/json", "text/plain", ""):
        raise HttpError(
            415, f"Unsupported Content-Type {ctype!r}: send application/json or multipart/form-data."
        )
    if not request.body:
        return {}, {}
    try:
        data = json.loads(request.body)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, and a number of over 4,300 digits
        raise HttpError(400, f"The request body is not valid JSON ({exc}).") from None
    except RecursionError:  # json.loads of ~1,000 nested arrays or objects (found by hub/tests/test_fuzz.py)
        raise HttpError(400, "The request body is nested too deeply to be a job.") from None
    if not isinstance(data, dict):
        raise HttpError(400, 'The request body must be a JSON object, e.g. {"kind": "video", …}.')
    return data, {}


def _check_fields(
    form_fields: set[str], data: dict[str, Any], files: dict[str, Any], *, what: str, json_body: bool
) -> None:
    """Unknown fields are refused by name (a typo must not be dropped silently); files only in multipart."""
    errors: dict[str, list[str]] = {}
    allowed = sorted(f for f in form_fields if f not in FILE_FIELDS)
    file_fields = sorted(f for f in form_fields if f in FILE_FIELDS)
    for key in data:
        if key in FILE_FIELDS and key in form_fields and json_body:
            errors[key] = ["This is a file: send the request as multipart/form-data with the file in it."]
        elif key not in form_fields:
            errors[key] = [f"Unknown field for {what}; its fields are: {', '.join(allowed)}."]
    for key in files:
        if key not in form_fields or key not in FILE_FIELDS:
            hint = f"its files are: {', '.join(file_fields)}" if file_fields else "it takes no file"
            errors[key] = [f"Unknown file for {what}; {hint}."]
    if errors:
        raise RequestInvalid(errors)


def _typed(schema: type, data: dict[str, Any]) -> dict[str, Any]:
    """JSON values checked for type by the pair's schema (strings, numbers, booleans where each belongs)."""
    try:
        model = schema.model_validate(data)
    except PydanticValidationError as exc:
        raise RequestInvalid(pydantic_errors(exc.errors())) from None
    return {k: v for k, v in model.model_dump(exclude_unset=True).items() if v is not None}


def json_body(request: HttpRequest, schema: type) -> Any:
    """The JSON body checked by ``schema`` (a 422 naming each field), read after the scope check: a read-only
    token learns nothing more. For the routes that take one JSON object (presets, albums)."""
    data, _files = read_body(request, files_allowed=False)
    try:
        return schema.model_validate(data)
    except PydanticValidationError as exc:
        raise RequestInvalid(pydantic_errors(exc.errors())) from None


def json_request_body(schema: type) -> dict[str, Any]:
    """``openapi_extra`` for such a route: the body it reads itself (``json_body``), declared in the schema."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": schema.model_json_schema()}},
        }
    }


def pydantic_errors(errors: list[dict[str, Any]], *, skip: int = 0) -> dict[str, list[str]]:
    """pydantic's error list as ``{field: [message]}`` (the shape every 422 of this API has)."""
    out: dict[str, list[str]] = {}
    for err in errors:
        loc = [str(p) for p in err.get("loc", ())][skip:]
        name = ".".join(loc) or "__all__"
        kind = err.get("type", "")
        if kind == "extra_forbidden":
            message = "Unknown field."
        elif kind == "missing":
            message = "This field is required."
        else:
            message = str(err.get("msg", "Invalid value."))
        out.setdefault(name, []).append(message)
    return out


def _device_for_submit(raw: Any) -> Device | None:
    """The device a request pins its job to, or None for "any capable device" (``device`` left out or "any")."""
    if raw in (None, "") or (isinstance(raw, str) and raw.strip().lower() == ANY_DEVICE):
        if not Device.objects.exists():
            raise _invalid("device", "There is no device yet; an admin adds one first.")
        return None
    device = find_device(raw)
    if device is None:
        raise _invalid("device", f"No such device: {str(raw)[:40]!r}. GET /api/devices lists them.")
    return device


def _what(device: Device, kind: str) -> str:
    label = JobKind(kind).label.lower()
    return f"{'an' if label[0] in 'aeiou' else 'a'} {label} job on a {device.get_kind_display()}"


def _validated(
    request: HttpRequest, *, device: Device, kind: str, data: dict[str, Any], files: dict[str, Any]
) -> dict[str, Any]:
    form = form_for(owner=request.user, device=device, kind=kind, data=None)
    schema = schema_for(device.kind, kind)
    json_body = not (request.content_type or "").lower().startswith(("multipart/", "application/x-www"))
    # ``lift_limits`` is on admins' forms only; anyone else's is refused by admission with a sentence that says why.
    known = set(form.fields) | {"lift_limits"}
    _check_fields(known, data, files, what=_what(device, kind), json_body=json_body)
    # Multipart values are strings, the form's native input: the form's own messages judge them.
    return _typed(schema, data) if (json_body and schema is not None) else data


def submission_of(
    request: HttpRequest, data: dict[str, Any], files: dict[str, Any], *, key: str | None = None
) -> Submission:
    """A ``POST /api/jobs`` body as the one ``Submission`` (``jobs.queue.submission``): on its device, or on the
    pool for "any"; each device's form takes the body's fields by name and type, a preset's values under them and
    its defaults (``fields_on``). (The batch route reads each of its members with this too:
    ``jobs.doors.api_batch``.)"""
    data = dict(data)
    kind = data.pop("kind", None)
    device_raw = data.pop("device", None)
    preset = data.pop("preset", None)
    if not isinstance(kind, str) or kind not in JobKind.values:
        shown = "missing" if kind is None else repr(kind)[:40]
        raise _invalid("kind", f"Give the job's kind ({shown}): one of {', '.join(JobKind.values)}.")
    # A file field may name another job's result: {"from_job": 12, "artifact": "image-1.png"} (a chain).
    files = {**files, **result_refs(data, FILE_FIELDS)}
    device = _device_for_submit(device_raw)

    def fields_on(on: Device) -> tuple[dict[str, Any], dict[str, Any]]:
        """The body as ``on``'s form takes it: its fields checked by name and type, a preset's values under them
        (the body's fields win), its defaults filled in."""
        typed = _validated(request, device=on, kind=kind, data=data, files=files)
        typed = with_preset(owner=request.user, kind=kind, name=preset, data=typed)
        return with_defaults(owner=request.user, device=on, kind=kind, data=typed, files=files), files

    return Submission(request.user, kind, {}, files, device=device, fields_on=fields_on, token=key)


# -- jobs -----------------------------------------------------------------------------------------------------
@router.post(
    "",
    url_name="job_submit",
    response={201: SubmittedOut, 200: SubmittedOut, **SUBMIT_ERRORS},
    openapi_extra=submit_body_openapi(api_schemas(), file_fields_of),
    summary="Submit a job",
)
def submit(request: HttpRequest):
    """Queue a job of any kind: JSON, or multipart/form-data when a file goes with it.

    `device` left out (or `"any"`): any capable device, the pool of every device that can do exactly this
    request; the job runs on whichever frees first (`pinned` false, `pool` in the answer). A device id pins the
    job to that device. `preset` names one of your presets or the household's (yours wins on a shared name): its
    values are the defaults, the body's fields override them; an unknown preset is a 422 naming `preset`.
    The fields are the submit form's (`GET /api/devices/{id}/capabilities` says what a device
    offers); fields left out take the form's defaults, as the page pre-fills them.
    A request the device would turn down is a 422 naming the field and the reason, in the page's words; one no
    device of the pool can do names each device's reason.
    With an `Idempotency-Key` header, sending the same key again (a retry) answers 200 with the job it queued.
    """
    require_scope(request, SUBMIT)
    check_submit(request)
    data, files = read_body(request, files_allowed=True)
    key = (request.headers.get("Idempotency-Key") or "").strip()[:200] or None
    job = submit_submission(submission_of(request, data, files, key=key))
    admission = job.admission
    return Status(
        200 if getattr(job, "idempotent_replay", False) else 201,
        {
            **job_detail_out(request, job),
            "estimate_starts_at": admission.starts_at,
            "estimate_ready_at": admission.ready_at,
            "warnings": admission.warnings,
        },
    )


def _filter_values(raw: str | None, allowed: dict[str, list[str]], name: str) -> list[str]:
    values: list[str] = []
    for part in (raw or "").split(","):
        part = part.strip()
        if not part:
            continue
        if part not in allowed:
            raise _invalid(name, f"Unknown {name} {part[:40]!r}; one of {', '.join(allowed)}.")
        values.extend(allowed[part])
    return values


STATE_FILTERS = {
    **{s: [s] for s in JobState.values},
    **{g: [str(s) for s in v] for g, v in STATE_GROUPS.items()},
}
KIND_FILTERS = {k: [k] for k in JobKind.values}


@router.get("", url_name="job_list", response={200: JobListOut, **ERRORS}, summary="List jobs")
def job_list(
    request: HttpRequest,
    state: str | None = Query(
        None, description="A state or a group (waiting, running, done, failed, cancelled); comma-separated."
    ),
    kind: str | None = Query(None, description="video, mesh, music, image, speech; comma-separated."),
    device: str | None = Query(None, description="A device id."),
    owner: str | None = Query(
        None, description="A username (admins see everyone's; others what they may see)."
    ),
    q: str | None = Query(
        None, max_length=200, description="Words the prompt must all hold, in any order, ignoring case."
    ),
    cursor: str | None = Query(None, description="The `next` of the previous page."),
    limit: int = Query(24, ge=1, le=100),
):
    """The jobs you may see (your own, shared ones; everything for admins), newest first, in pages."""
    require_scope(request, READ)
    qs = jobs_visible_to(request.user)
    if states := _filter_values(state, STATE_FILTERS, "state"):
        qs = qs.filter(state__in=states)
    if kinds := _filter_values(kind, KIND_FILTERS, "kind"):
        qs = qs.filter(kind__in=kinds)
    if device:
        pk = parse_id(device)
        if pk is None:
            raise _invalid("device", "A device id is a whole number.")
        qs = qs.filter(device_id=pk)
    if owner:
        qs = qs.filter(owner__username=owner)
    if q:
        qs = prompt_search(qs, q)  # the gallery's rule: every word, in any order
    if cursor:
        position = decode_cursor(cursor)
        if position is None:
            raise _invalid("cursor", "Not a cursor this API gave out; start again without it.")
        created, pk = position
        qs = qs.filter(Q(created__lt=created) | Q(created=created, pk__lt=pk))
    jobs = list(qs.order_by("-created", "-id")[: limit + 1])
    more = len(jobs) > limit
    jobs = jobs[:limit]
    return {
        "items": [job_out(request, j) for j in jobs],
        "next": encode_cursor(jobs[-1]) if more else None,
    }


@router.get(
    "/download",
    url_name="job_download",
    response={**ERRORS},
    openapi_extra={"responses": {"200": {"description": "A zip", "content": {"application/zip": {}}}}},
    summary="Download jobs as one zip",
)
def job_download(request: HttpRequest):
    """The results of the jobs you name, or of a gallery search, as one zip streamed as it is built: a folder per
    job (`0042-a-red-fox/video.mp4`) with its `settings.json`. Files are stored, not compressed; `Content-Length`
    is sent.

    Query: `ids=12,15,20` (or `ids` repeated) for a selection, else the gallery's filters: `q`, `kind`, `state`
    (`waiting`, `running`, `done`, `failed`, `cancelled`), `person` (a username), `device` (an id), `since` and
    `until` (`YYYY-MM-DD`), `bookmarked=on`, `batch`. Only jobs you may see are included: an id you can't see is
    left out, as if it did not exist. 400 when nothing is selected, none of the jobs has a result, a filter or
    id is malformed, or more than `HUB_ZIP_MAX_JOBS` jobs match."""
    require_scope(request, READ)
    try:
        jobs = jobs_to_download(request.user, request.GET)
        return stream_jobs_zip(
            request, jobs, label="tiiny-hub-selection" if "ids" in request.GET else "tiiny-hub"
        )
    except (SelectionInvalid, NothingToDownload, TooManyJobs) as exc:
        raise HttpError(400, str(exc)) from exc


@router.get("/{job_id}", url_name="job_get", response={200: JobDetailOut, **ERRORS}, summary="Get a job")
def job_get(request: HttpRequest, job_id: str):
    """Progress, ETA (`predicted_finish`, and `eta` while it runs), its story (events) and its files."""
    require_scope(request, READ)
    return job_detail_out(request, _job(request, job_id))


@router.post(
    "/{job_id}/cancel",
    url_name="job_cancel",
    response={200: JobDetailOut, **ERRORS},
    openapi_extra={
        "requestBody": {
            "required": False,
            "content": {"application/json": {"schema": CancelIn.model_json_schema()}},
        }
    },
    summary="Cancel a job",
)
def job_cancel(request: HttpRequest, job_id: str):
    """Cancel a waiting or running job (yours; admins: anyone's). The body is optional: `{"reason": "…"}`."""
    require_scope(request, SUBMIT)
    job = _job(request, job_id)
    # Read by hand, not as a ninja body parameter: a bare POST (no body at all) must work too.
    data, _ = read_body(request, files_allowed=False)
    payload = _typed(CancelIn, data)
    reason = " ".join(str(payload.get("reason") or "").split())[:300]
    services.job_cancel(job=job, by=request.user, reason=reason)
    return job_detail_out(request, job)


class TrashedOut(Schema):
    id: int
    trashed: bool = Field(description="In the trash: hidden everywhere, restorable until `purge_at`.")
    trashed_at: dt.datetime | None
    purge_at: dt.datetime | None = Field(description="When the daily task removes its files for good.")
    cancelled: list[int] = Field(description="The jobs that waited for its result and were cancelled.")


@router.delete(
    "/{job_id}",
    url_name="job_delete",
    response={200: TrashedOut, 409: ErrorOut, **ERRORS},
    summary="Move a job's results to the trash",
)
def job_delete(request: HttpRequest, job_id: str, force: bool = False):
    """Moves a finished job and its results to the trash (yours; admins: anyone's): hidden everywhere, its files
    kept `HUB_TRASH_DAYS` days, restored byte for byte by `POST /api/jobs/{id}/restore`. A job other jobs still
    wait for (a chain) is refused with 409 naming them unless `?force=true`, which cancels them. A running job:
    422 (cancel it first). Deleting a job already in the trash answers the same again."""
    require_scope(request, SUBMIT)
    job = _job_or_trashed(request, job_id)
    if not trash.can_delete_results(request.user, job):
        raise PermissionDenied("You can only delete your own results.")
    waiting = trash.waiting_children(job)
    try:
        job = trash.trash_move(job=job, by=request.user, force=force)
    except trash.ChildrenWaiting as exc:
        return Status(409, {"detail": " ".join(exc.messages), "errors": {"force": [" ".join(exc.messages)]}})
    cancelled = [pk for pk in waiting if Job.objects.filter(pk=pk, state=JobState.CANCELLED).exists()]
    return {
        "id": job.pk,
        "trashed": job.trashed_at is not None,
        "trashed_at": job.trashed_at,
        "purge_at": trash.purge_at(job),
        "cancelled": cancelled,
    }


@router.post(
    "/{job_id}/restore",
    url_name="job_restore",
    response={200: JobDetailOut, **ERRORS},
    summary="Restore a job from the trash",
)
def job_restore(request: HttpRequest, job_id: str):
    """Takes a job of yours (admins: anyone's) out of the trash, its files as they were. 404 for a job that is not
    in the trash or not yours. Jobs that its delete cancelled stay cancelled (retry them)."""
    require_scope(request, SUBMIT)
    pk = parse_id(job_id)
    job = trash.trashed_job_for(request.user, pk if pk is not None else -1)
    return job_detail_out(request, trash.trash_restore(job=job, by=request.user))


@router.post(
    "/{job_id}/retry",
    url_name="job_retry",
    response={200: JobDetailOut, **SUBMIT_ERRORS},
    summary="Retry a failed, cancelled or interrupted job",
)
def job_retry(request: HttpRequest, job_id: str):
    require_scope(request, SUBMIT)
    job = _job(request, job_id)
    check_submit(request)
    return job_detail_out(request, services.job_retry(job=job, by=request.user))


def _again_data(job: Job) -> dict[str, Any]:
    """The job's settings as its form's fields (what the page's "run again" form is filled in with)."""
    form_class = form_class_for(job.device.kind, job.kind)
    return {**form_class.fields_from_params(job.params or {}), "model": job.model_id, "polite": job.polite}


@router.post(
    "/{job_id}/again",
    url_name="job_again",
    response={201: JobDetailOut, **SUBMIT_ERRORS},
    openapi_extra={
        "requestBody": {
            "required": False,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "description": "The form fields to change (as for POST /api/jobs, without device "
                        "and kind); the rest is taken from the job. Input files are reused.",
                        "additionalProperties": True,
                    }
                }
            },
        }
    },
    summary="Run a job again with changes",
)
def job_again(request: HttpRequest, job_id: str):
    """A new job like this one (yours, or one you may see) with the changed fields; it is yours."""
    require_scope(request, SUBMIT)
    job = _job(request, job_id)
    check_submit(request)
    changes, _ = read_body(request, files_allowed=False)
    for key in ("device", "kind"):
        if key in changes:
            raise _invalid(key, "Run again keeps the device and the kind; submit a new job to change them.")
    device = job.device
    changes = _validated(request, device=device, kind=job.kind, data=changes, files={})
    for key in FILE_FIELDS:
        if key in changes:
            raise _invalid(
                key, "Run again reuses the job's input files; submit a new job to use another file."
            )
    data = {"when": "asap", **_again_data(job), **changes}
    data = with_defaults(owner=request.user, device=device, kind=job.kind, data=data, files={})
    # A pool job's run again is for the pool again; a pinned one's, for its device. Its stored inputs are
    # checked again and reused, its parent links kept (``jobs.queue.submission.again_files``).
    pinned = device if job.pinned else None
    new = submit_submission(Submission(request.user, job.kind, data, device=pinned, again=job))
    return Status(201, job_detail_out(request, new))


@router.post(
    "/{job_id}/share",
    url_name="job_share",
    response={200: JobDetailOut, **ERRORS},
    summary="Share or unshare",
)
def job_share(request: HttpRequest, job_id: str, payload: ShareIn):
    """`{"shared": true}` shares the job and its results with the household; false makes it private again."""
    require_scope(request, SUBMIT)
    job = _job(request, job_id)
    return job_detail_out(request, services.job_set_shared(job=job, by=request.user, shared=payload.shared))


@router.api_operation(
    ["GET", "HEAD"],
    "/{job_id}/artifacts/{artifact_id}",
    url_name="job_artifact",
    response={206: None, 304: None, 416: None, **ERRORS},  # 200: openapi_extra below (one key, not two)
    openapi_extra={
        "responses": {
            "200": {
                "description": "The file (`Range` gets 206; `If-None-Match` 304).",
                "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
            }
        }
    },
    summary="Download a result file",
)
def job_artifact(request: HttpRequest, job_id: str, artifact_id: str, download: bool = False) -> HttpResponse:
    """The file itself, as the job page serves it (ranges, caching). `?download=1` for an attachment."""
    require_scope(request, READ)
    job = _job(request, job_id)
    pk = parse_id(artifact_id)
    artifact = job.artifacts.select_related("job").filter(pk=pk).first() if pk is not None else None
    if artifact is None:
        raise Http404("No such file.")
    return artifact_response(request, artifact, inline=not download)


# -- the queue plan -----------------------------------------------------------------------------------------------
__all__ = ["parse_id", "pydantic_errors", "router"]
