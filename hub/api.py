"""The hub's REST API under /api/ (django-ninja; OpenAPI at /api/openapi.json, docs at /api/docs).

One NinjaAPI; each app adds its router (``jobs.doors.api``, ``devices.api``). Scripts authenticate with a personal
token (``Authorization: Bearer …``), the browser with its session (CSRF checked) — ``hub.api_auth``.

Every error is JSON ``{"detail": "…", "errors": {field: [messages]}?}`` with a 4xx status: the services'
ValidationError and the admission's RequestInvalid are 422 naming the field; PermissionDenied 403; Http404
404 (someone else's private job is "No such job.", exactly like one that doesn't exist); too many
submissions 429 with Retry-After; a body over DATA_UPLOAD_MAX_MEMORY_SIZE 413; other unreadable bodies 400.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, UnreadablePostError
from django.http.multipartparser import MultiPartParserError
from django.urls import path, re_path
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI
from ninja.errors import HttpError
from ninja.errors import ValidationError as NinjaValidationError

from devices.api import router as devices_router
from hub.api_auth import API_AUTH
from hub.ratelimit import RateLimited
from jobs.doors.api import pydantic_errors
from jobs.doors.api import router as jobs_router
from jobs.doors.api_batch import router as jobs_batch_router
from jobs.doors.api_queue import router as jobs_queue_router
from jobs.queue.admission import RequestInvalid

api = NinjaAPI(
    title="Tiiny Hub API",
    version="1",
    urls_namespace="api",
    auth=API_AUTH,
    description=(
        "Queue renders on the household's devices and follow them. Authenticate with a personal token "
        "(`Authorization: Bearer thub_…`, created on the *API tokens* page) or, in the browser, your session. "
        "GET routes need the `read` scope; POST, PATCH and DELETE routes `submit`. Errors are "
        '`{"detail": "…", "errors": {"field": ["…"]}}`.'
    ),
)
api.add_router("", jobs_batch_router)  # before /jobs: its /jobs/batch must not be read as /jobs/{job_id}
api.add_router("/jobs", jobs_router)
api.add_router("/presets", "jobs.doors.api_presets.router")  # named settings (jobs/doors/api_presets.py)
api.add_router("/albums", "jobs.doors.api_albums.router")  # shared albums (jobs/doors/api_albums.py)
api.add_router("/devices", devices_router)
api.add_router("/notify", "notify.api.router")  # notification channels (notify/api.py)
api.add_router("", jobs_queue_router)
api.add_router("/audit", "hub.api_audit.router")  # the audit log, admins only (hub/api_audit.py)


@api.get("/ping", auth=None, include_in_schema=False)
def ping(request):
    return {"ok": True}


@csrf_exempt  # it changes nothing, and a POST to a wrong path deserves the API's answer, not a CSRF page
def unknown_route(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Any path under /api/ that no route matches: the API's JSON 404, not Django's HTML page."""
    return _error(request, 404, f"No route /api/{rest}; the routes are listed at /api/docs.")


def urls() -> tuple[list, str, str]:
    """The API's routes, then the JSON 404 for every other path under /api/ (what ``hub.urls`` mounts)."""
    patterns, app_name, namespace = api.urls
    # ninja's root answers an HTML 404; its name stays (the schema's server address is reversed from it)
    patterns = [
        path("", unknown_route, name="api-root") if getattr(p, "name", None) == "api-root" else p
        for p in patterns
    ]
    return [*patterns, re_path(r"^(?P<rest>.*)$", unknown_route, name="unknown")], app_name, namespace


def _error(request: HttpRequest, status: int, detail: str, errors: dict[str, list[str]] | None = None):
    body: dict[str, Any] = {"detail": detail}
    if errors:
        body["errors"] = errors
    return api.create_response(request, body, status=status)


def _summary(errors: dict[str, list[str]]) -> str:
    parts = []
    for name, messages in errors.items():
        text = " ".join(messages)
        parts.append(text if name == "__all__" else f"{name}: {text}")
    return " ".join(parts) or "The request is not valid."


@api.exception_handler(RequestInvalid)
def _request_invalid(request: HttpRequest, exc: RequestInvalid) -> HttpResponse:
    return _error(request, 422, _summary(exc.errors), exc.errors)


@api.exception_handler(ValidationError)
def _validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    if hasattr(exc, "error_dict"):
        errors = {k: [str(m) for m in v] for k, v in exc.message_dict.items()}
    else:
        errors = {"__all__": [str(m) for m in exc.messages]}
    return _error(request, 422, _summary(errors), errors)


@api.exception_handler(NinjaValidationError)
def _schema_error(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    """ninja's own 422 (query parameters, JSON bodies of the small routes), readable: field and message."""
    errors: dict[str, list[str]] = {}
    for err in exc.errors:
        loc = list(err.get("loc", ()))
        # ("body", "payload", "shared") -> "shared"; ("query", "limit") -> "limit"
        skip = 2 if loc[:1] == ["body"] and len(loc) > 2 else 1
        for name, messages in pydantic_errors([err], skip=skip).items():
            errors.setdefault(name, []).extend(messages)
    return _error(request, 422, _summary(errors), errors)


@api.exception_handler(PermissionDenied)
def _forbidden(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
    return _error(request, 403, str(exc) or "You may not do this.")


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return _error(request, 404, str(exc) or "Not found.")


@api.exception_handler(RateLimited)
def _rate_limited(request: HttpRequest, exc: RateLimited) -> HttpResponse:
    response = _error(request, 429, str(exc))
    response["Retry-After"] = str(exc.retry_after)
    return response


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    detail = str(exc)
    if exc.status_code == 400 and detail.startswith("Cannot parse request body"):
        cause = exc.__cause__
        detail = "The request body is not valid JSON" + (f" ({cause})." if cause else ".")
    return _error(request, exc.status_code, detail)


@api.exception_handler(RequestDataTooBig)
def _too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return _error(request, 413, f"The request body is too large; the limit is {limit // 2**20} MB.")


@api.exception_handler(SuspiciousOperation)
def _suspicious(request: HttpRequest, exc: SuspiciousOperation) -> HttpResponse:
    return _error(request, 400, f"The request could not be read: {exc}")


@api.exception_handler(MultiPartParserError)
def _bad_multipart(request: HttpRequest, exc: MultiPartParserError) -> HttpResponse:
    return _error(request, 400, f"The multipart body could not be read: {exc}")


@api.exception_handler(UnreadablePostError)
def _unreadable(request: HttpRequest, exc: UnreadablePostError) -> HttpResponse:
    return _error(request, 400, "The request body could not be read.")
