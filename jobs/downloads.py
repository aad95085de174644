"""Serving result files, only to people allowed to see the job.

``artifact_response(request, artifact)`` authorizes (owner, admins, shared jobs; or a valid share token given
by the caller) and answers with Django's ``FileResponse``. Behind nginx or Apache set ``JOBS_SENDFILE`` to
``x-accel`` (``X-Accel-Redirect`` to ``JOBS_SENDFILE_PREFIX`` + path, an ``internal`` location aliasing
MEDIA_ROOT) or ``x-sendfile`` (``X-Sendfile`` with the absolute path) so the web server streams the bytes.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.http import FileResponse, Http404, HttpRequest, HttpResponse

from jobs.models import Artifact
from jobs.selectors import can_view


def artifact_path(artifact: Artifact) -> Path:
    """The file on disk, refusing anything that would resolve outside MEDIA_ROOT/results."""
    root = (Path(settings.MEDIA_ROOT) / "results").resolve()
    path = (Path(settings.MEDIA_ROOT) / str(artifact.file)).resolve()
    if root not in path.parents:
        raise Http404("No such file.")
    return path


def artifact_response(
    request: HttpRequest, artifact: Artifact, *, share_token: str | None = None, inline: bool = True
) -> HttpResponse:
    job = artifact.job
    allowed = can_view(request.user, job) or (bool(share_token) and share_token == job.share_token)
    if not allowed:
        raise Http404("No such file.")  # no existence leak
    path = artifact_path(artifact)
    if not path.is_file():
        raise Http404("The file is gone.")
    disposition = "inline" if inline else "attachment"
    mode = getattr(settings, "JOBS_SENDFILE", "")
    if mode in ("x-accel", "x-sendfile"):
        response = HttpResponse(content_type=artifact.mime)
        rel = path.relative_to(Path(settings.MEDIA_ROOT).resolve()).as_posix()
        if mode == "x-accel":
            response["X-Accel-Redirect"] = settings.JOBS_SENDFILE_PREFIX.rstrip("/") + "/" + quote(rel)
        else:
            response["X-Sendfile"] = str(path)
        response["Content-Disposition"] = f"{disposition}; filename*=UTF-8''{quote(artifact.name)}"
    else:
        response = FileResponse(
            open(path, "rb"), content_type=artifact.mime, as_attachment=not inline, filename=artifact.name
        )
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, max-age=3600"
    return response
