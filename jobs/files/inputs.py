"""A job's inputs (start image, 3D source picture, voice reference) and its live preview, for the job page.

Inputs live at ``MEDIA_ROOT/results/<owner>/<job>/inputs/<name>.<ext>`` and ``job.params["files"]`` maps each
input's name to that relative path (``jobs.queue.services._save_uploads``). They are served like results, by
``jobs.files.downloads.artifact_response`` (same authorization, byte ranges, revalidation), and only from inside the
job's own ``inputs`` folder: a path in ``params`` that resolves anywhere else is a 404.
"""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import reverse

from jobs.models import Artifact, Job

#: What each input is called on the page; ``image`` depends on the job's kind.
LABELS = {
    "start_image": "Start image",
    "end_image": "End image",
    "ref_audio": "Voice reference",
}
IMAGE_LABELS = {"mesh": "3D source image", "image": "Picture to edit"}
#: Types shown inline; anything else an input could be is offered as a download, never rendered.
INLINE = {"image/png", "image/jpeg", "image/webp", "image/gif", "audio/wav", "audio/x-wav", "audio/mpeg",
          "audio/ogg", "audio/flac", "audio/mp4"}  # fmt: skip


@dataclass(frozen=True)
class JobInput:
    name: str
    label: str
    media: str  # "image" | "audio" | "file"
    url: str


def label_of(job: Job, name: str) -> str:
    if name == "image":
        return IMAGE_LABELS.get(job.kind, "Picture")
    return LABELS.get(name, name.replace("_", " ").capitalize())


def mime_of(path: Path) -> str:
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return "audio/wav" if mime in ("audio/x-wav", "audio/vnd.wave") else mime


def input_file(job: Job, name: str) -> Path | None:
    """The input's file, only if it exists inside the job's own inputs folder."""
    rel = (job.params.get("files") or {}).get(name) if isinstance(job.params, dict) else None
    if not isinstance(rel, str) or not rel:
        return None
    media = Path(settings.MEDIA_ROOT)
    folder = (media / "results" / str(job.owner_id) / str(job.pk) / "inputs").resolve()
    try:
        path = (media / rel).resolve()  # symlinks and ".." resolved before the check
    except (OSError, RuntimeError, ValueError):
        return None
    if folder not in path.parents or not path.is_file():
        return None
    return path


def job_inputs(job: Job, *, share_token: str = "") -> list[JobInput]:
    """The inputs the page shows, in the form's order; links go through the share link when given one."""
    files = job.params.get("files") if isinstance(job.params, dict) else None
    out = []
    for name in sorted(files or {}, key=lambda n: (list(LABELS).index(n) if n in LABELS else -1, n)):
        path = input_file(job, name)
        if path is None:
            continue
        mime = mime_of(path)
        media = mime.split("/")[0] if mime in INLINE else "file"
        if share_token:
            url = reverse("jobs-public-input", args=[share_token, name])
        else:
            url = reverse("jobs-input", args=[job.pk, name])
        out.append(JobInput(name=name, label=label_of(job, name), media=media, url=url))
    return out


def _as_artifact(job: Job, path: Path, mime: str) -> Artifact:
    """An unsaved Artifact describing the file, so ``artifact_response`` serves it with all its rules."""
    rel = path.relative_to(Path(settings.MEDIA_ROOT).resolve()).as_posix()
    return Artifact(
        job=job, kind=Artifact.Kind.SIDECAR, file=rel, name=path.name, mime=mime, bytes=0, sha256=""
    )


def input_response(
    request: HttpRequest, job: Job, name: str, *, share_token: str | None = None
) -> HttpResponse:
    from jobs.files.downloads import artifact_response

    path = input_file(job, name)
    if path is None:
        raise Http404("No such input.")
    mime = mime_of(path)
    inline = mime in INLINE and not request.GET.get("download")
    artifact = _as_artifact(job, path, mime if mime in INLINE else "application/octet-stream")
    return artifact_response(request, artifact, share_token=share_token, inline=inline)


def preview_response(request: HttpRequest, job: Job) -> HttpResponse:
    from jobs.files.downloads import artifact_response
    from jobs.files.previews import preview_path, sniff_mime

    path = preview_path(job)
    try:
        with open(path, "rb") as fh:
            mime = sniff_mime(fh.read(16))
    except OSError:
        mime = ""
    if not mime:
        raise Http404("No preview yet.")
    return artifact_response(request, _as_artifact(job, path.resolve(), mime))
