"""One small runner per (device kind, job kind). ``runner_for(job)`` picks it and builds the device client."""

from __future__ import annotations

from django.conf import settings

from jobs.runners.base import PollResult, Runner, Stopped
from jobs.runners.tensorsharp import TensorSharpEditRunner, TensorSharpVideoRunner
from jobs.runners.tiiny import (
    TiinyImageRunner,
    TiinyMeshRunner,
    TiinyMusicRunner,
    TiinySpeechRunner,
    TiinyVideoRunner,
)

RUNNERS: dict[tuple[str, str], type[Runner]] = {
    ("tiiny", "video"): TiinyVideoRunner,
    ("tiiny", "mesh"): TiinyMeshRunner,
    ("tiiny", "image"): TiinyImageRunner,
    ("tiiny", "speech"): TiinySpeechRunner,
    ("tiiny", "music"): TiinyMusicRunner,
    ("tensorsharp", "video"): TensorSharpVideoRunner,
    ("tensorsharp", "image"): TensorSharpEditRunner,
}


def runner_class(device_kind: str, kind: str) -> type[Runner]:
    try:
        return RUNNERS[(device_kind, kind)]
    except KeyError:
        raise ValueError(f"no runner for {kind} on a {device_kind} device") from None


def style_of(device_kind: str, kind: str) -> str:
    return runner_class(device_kind, kind).style


def client_for_job(device):
    from devices.clients import TensorSharpClient, TiinyClient

    if device.kind == "tensorsharp":
        return TensorSharpClient.for_device(device)
    return TiinyClient.for_device(
        device, poll_interval=settings.JOBS_DEVICE_POLL_S, load_grace_s=settings.JOBS_LOAD_GRACE_S
    )


def runner_for(job) -> Runner:
    return runner_class(job.device.kind, job.kind)(job, client_for_job(job.device))


__all__ = ["PollResult", "Runner", "Stopped", "client_for_job", "runner_class", "runner_for", "style_of"]
