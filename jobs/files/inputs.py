"""A job's inputs (start image, 3D source picture, voice reference) and its live preview, for the job page.

Inputs live in the job's ``inputs`` folder of the store (``jobs.files.store.save_input``) and ``job.params["files"]``
maps each input's name to its stored name. They are served like results, by
``jobs.files.downloads.artifact_response`` (same authorization, byte ranges, revalidation), and only from inside the
job's own ``inputs`` folder: a name in ``params`` that resolves anywhere else is a 404.
"""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass
from pathlib import PurePosixPath

from django.core.files import File
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import reverse

from jobs.files import store
from jobs.files.downloads import artifact_response
from jobs.files.previews import sniff_mime
from jobs.files.store import Stored
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


def mime_of(name: str) -> str:
    mime = mimetypes.guess_type(PurePosixPath(name).name)[0] or "application/octet-stream"
    return "audio/wav" if mime in ("audio/x-wav", "audio/vnd.wave") else mime


def input_file(job: Job, name: str) -> Stored | None:
    """The input's file, only if it exists inside the job's own inputs folder."""
    stored = (job.params.get("files") or {}).get(name) if isinstance(job.params, dict) else None
    return store.find(stored, within=store.inputs_folder(job))


def job_inputs(job: Job, *, share_token: str = "") -> list[JobInput]:
    """The inputs the page shows, in the form's order; links go through the share link when given one."""
    files = job.params.get("files") if isinstance(job.params, dict) else None
    out = []
    for name in sorted(files or {}, key=lambda n: (list(LABELS).index(n) if n in LABELS else -1, n)):
        found = input_file(job, name)
        if found is None:
            continue
        mime = mime_of(found.name)
        media = mime.split("/")[0] if mime in INLINE else "file"
        if share_token:
            url = reverse("jobs-public-input", args=[share_token, name])
        else:
            url = reverse("jobs-input", args=[job.pk, name])
        out.append(JobInput(name=name, label=label_of(job, name), media=media, url=url))
    return out


def stored_inputs(job: Job) -> dict[str, File]:
    """The job's input files, opened (the caller closes them): what "run again" gives the form to check again."""
    out = {}
    for name, stored in ((job.params or {}).get("files") or {}).items():
        found = store.find(str(stored))
        if found is not None:
            out[name] = File(store.open_stored(found), name=PurePosixPath(found.name).name)
    return out


def _as_artifact(job: Job, found: Stored, mime: str) -> Artifact:
    """An unsaved Artifact describing the file, so ``artifact_response`` serves it with all its rules."""
    return Artifact(
        job=job,
        kind=Artifact.Kind.SIDECAR,
        file=found.name,
        name=PurePosixPath(found.name).name,
        mime=mime,
        bytes=0,
        sha256="",
    )


def input_response(
    request: HttpRequest, job: Job, name: str, *, share_token: str | None = None
) -> HttpResponse:
    found = input_file(job, name)
    if found is None:
        raise Http404("No such input.")
    mime = mime_of(found.name)
    inline = mime in INLINE and not request.GET.get("download")
    artifact = _as_artifact(job, found, mime if mime in INLINE else "application/octet-stream")
    return artifact_response(request, artifact, share_token=share_token, inline=inline)


def preview_response(request: HttpRequest, job: Job) -> HttpResponse:
    found = store.find(store.preview_name(job))
    mime = ""
    if found is not None:
        try:
            with store.open_range(found, 0, min(16, found.size)) as fh:
                mime = sniff_mime(fh.read(16))
        except OSError:
            mime = ""
    if not mime:
        raise Http404("No preview yet.")
    return artifact_response(request, _as_artifact(job, found, mime))
