"""One small runner per (device kind, job kind), named in ``jobs.kinds.table``. ``runner_for(job)`` builds it."""

from __future__ import annotations

from jobs.kinds.runners.base import PollResult, Runner, Stopped


def runner_class(device_kind: str, kind: str) -> type[Runner]:
    from jobs.kinds.table import spec_for

    return spec_for(device_kind, kind).runner


def style_of(device_kind: str, kind: str) -> str:
    return runner_class(device_kind, kind).style


def runner_for(job) -> Runner:
    from devices.clients import client_for

    return runner_class(job.device.kind, job.kind)(job, client_for(job.device))


__all__ = ["PollResult", "Runner", "Stopped", "runner_class", "runner_for", "style_of"]
