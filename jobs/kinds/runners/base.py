"""What every runner shares: the device client, model loading, result files.

A runner is small and stateless between calls; everything it must remember lives on the Job row
(``remote_id``, ``remote_data``), so any worker can pick the job up after a restart. Device calls only go
through ``devices.clients``; the engine (``jobs.queue.engine``) owns transitions, the lease and error policy.
"""

from __future__ import annotations

import hashlib
import logging
import mimetypes
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from devices import errors
from jobs.models import Artifact, Job

logger = logging.getLogger("jobs.kinds.runners")

#: Called by stream/blocking runners as work advances: (progress 0-100, phase text). Returns True to stop.
ProgressFn = Callable[[float, str], bool]


@dataclass
class PollResult:
    status: str  # "running" | "done" | "failed"
    progress: float = 0.0
    phase: str = ""
    error: errors.DeviceError | None = None
    started: bool = False  # the device has begun rendering (queued → in progress)


class Stopped(Exception):
    """The job was cancelled (or lost its lease) while a stream/blocking runner worked."""


def job_dir(job: Job) -> Path:
    return Path(settings.MEDIA_ROOT) / "results" / str(job.owner_id) / str(job.pk)


def job_rel(job: Job, name: str) -> str:
    return f"results/{job.owner_id}/{job.pk}/{name}"


def input_path(job: Job, name: str) -> Path | None:
    rel = (job.params.get("files") or {}).get(name)
    return Path(settings.MEDIA_ROOT) / rel if rel else None


def input_bytes(job: Job, name: str) -> tuple[bytes, str, str] | None:
    """(data, file name, mime) of an uploaded input, or None."""
    path = input_path(job, name)
    if path is None or not path.exists():
        return None
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return path.read_bytes(), path.name, mime


def data_uri(job: Job, name: str) -> str | None:
    import base64

    got = input_bytes(job, name)
    if got is None:
        return None
    data, _name, mime = got
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def sha256_of(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1024 * 1024), b""):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def result_path(job: Job, name: str) -> Path:
    path = job_dir(job) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def save_artifact(
    job: Job,
    *,
    kind: str,
    name: str,
    data: bytes | None = None,
    path: Path | None = None,
    mime: str | None = None,
) -> Artifact:
    """Write (or adopt) a result file under the job's folder, checksum it, and record it. Idempotent by name,
    so a collect step that runs twice (after a crash) leaves one row per file."""
    dest = result_path(job, name)
    if data is not None:
        tmp = dest.with_name(dest.name + ".part")
        tmp.write_bytes(data)
        tmp.replace(dest)
    elif path is not None and Path(path) != dest:
        shutil.move(str(path), dest)
    digest, size = sha256_of(dest)
    mime = mime or mimetypes.guess_type(name)[0] or "application/octet-stream"
    with transaction.atomic():
        Artifact.objects.filter(job=job, name=name).delete()
        artifact = Artifact.objects.create(
            job=job, kind=kind, file=job_rel(job, name), name=name, mime=mime, bytes=size, sha256=digest
        )
    return artifact


class Runner:
    """``prepare / submit / poll / collect / cancel``; ``style`` tells the engine how to drive it."""

    style = "blocking"  # "poll" | "blocking" | "stream"

    def __init__(self, job: Job, client: Any) -> None:
        self.job = job
        self.device = job.device
        self.client = client

    # -- shared steps ------------------------------------------------------------------------------------
    #: Whether ``prepare`` loaded the job's model (the shape's history then learns the render without the load)
    loaded: bool = False

    def prepare(self, *, polite: bool) -> list[str]:
        """Make the job's model ready; returns the models evicted for it."""
        return []

    def cancel(self) -> None:
        """Stop the work on the device (best effort)."""

    # -- poll style --------------------------------------------------------------------------------------
    def submit(self) -> tuple[str, dict[str, Any]]:
        """Create the device-side work; returns (remote id, remote_data updates). Must be the only create."""
        raise NotImplementedError

    def find_lost(self) -> str | None:
        """After a crash between the create call and storing its id: the id of the render we created, or None."""
        return None

    def poll(self) -> PollResult:
        raise NotImplementedError

    def advance(self) -> tuple[str, dict[str, Any]] | None:
        """Multi-step poll jobs (3D stages): submit the next step; None when there is none."""
        return None

    def collect(self) -> None:
        raise NotImplementedError

    # -- blocking and stream style -----------------------------------------------------------------------
    def execute(self, progress: ProgressFn) -> None:
        """Do the whole call(s) and save the results; raise ``Stopped`` if ``progress`` says stop."""
        raise NotImplementedError

    def timeout_s(self) -> float:
        """Read timeout for one long call: well above the expected time."""
        return max(300.0, 3 * (self.job.estimate_s or 60) + 120)
