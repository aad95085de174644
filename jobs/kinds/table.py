"""What differs per (device kind, job kind), in one table: the form, the runner, the estimate shape, the API schema.

The forms, the runners, the ETA code, the admission service and both APIs read from here, so adding a kind (or a
device kind) is one entry instead of a branch in each of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from devices.capabilities import Capabilities
from jobs.kinds import forms, schemas
from jobs.kinds.runners.base import Runner
from jobs.kinds.runners.tensorsharp import TensorSharpEditRunner, TensorSharpVideoRunner
from jobs.kinds.runners.tiiny import (
    TiinyImageRunner,
    TiinyMeshRunner,
    TiinyMusicRunner,
    TiinySpeechRunner,
    TiinyVideoRunner,
)
from jobs.models import JobKind
from jobs.queue import eta


@dataclass(frozen=True)
class Estimate:
    """How a request of this pair is priced: its RenderStat shape, its seed before history, and a hard limit."""

    shape: Callable[[str, dict[str, Any]], str]
    seed: Callable[[str, dict[str, Any]], float]
    #: Refuse requests predicted to take longer than this (the device would cut them off), or None.
    refuse_over_s: float | None = None
    refuse_why: str = ""


@dataclass(frozen=True)
class KindSpec:
    device_kind: str
    kind: str
    form: type[forms.JobForm]
    runner: type[Runner]
    estimate: Estimate
    #: Whether the device can run this kind right now, from what it reports.
    available: Callable[[Capabilities], bool] = lambda caps: True
    #: The pydantic input schema of ``POST /api/jobs`` for this pair (``jobs.kinds.schemas``), when it has one.
    api_schema: type | None = None

    @property
    def style(self) -> str:
        """ "poll" | "blocking" | "stream" (architecture.md, "Runner styles")."""
        return self.runner.style


# The device cuts a render off at 60 min (GENERATION_TIMEOUT); anything predicted over 55 is refused at submit.
TIINY_VIDEO_LIMIT_S = 55 * 60

SPECS: tuple[KindSpec, ...] = (
    KindSpec(
        "tiiny",
        JobKind.VIDEO,
        forms.TiinyVideoForm,
        TiinyVideoRunner,
        Estimate(
            eta.tiiny_video_shape,
            eta.tiiny_video_seed,
            refuse_over_s=TIINY_VIDEO_LIMIT_S,
            refuse_why="the device cuts renders off after an hour",
        ),
        api_schema=schemas.TiinyVideoFields,
    ),
    KindSpec(
        "tiiny",
        JobKind.MESH,
        forms.MeshForm,
        TiinyMeshRunner,
        Estimate(eta.mesh_shape, eta.mesh_seed),
        api_schema=schemas.MeshFields,
    ),
    KindSpec(
        "tiiny",
        JobKind.MUSIC,
        forms.MusicForm,
        TiinyMusicRunner,
        Estimate(eta.music_shape, eta.music_seed),
        api_schema=schemas.MusicFields,
    ),
    KindSpec(
        "tiiny",
        JobKind.IMAGE,
        forms.TiinyImageForm,
        TiinyImageRunner,
        Estimate(eta.tiiny_image_shape, eta.tiiny_image_seed),
        api_schema=schemas.TiinyImageFields,
    ),
    KindSpec(
        "tiiny",
        JobKind.SPEECH,
        forms.SpeechForm,
        TiinySpeechRunner,
        Estimate(eta.speech_shape, eta.speech_seed),
        api_schema=schemas.SpeechFields,
    ),
    KindSpec(
        "tensorsharp",
        JobKind.VIDEO,
        forms.TensorSharpVideoForm,
        TensorSharpVideoRunner,
        Estimate(eta.ts_video_shape, eta.ts_video_seed),
        available=lambda caps: bool(caps.tensorsharp and caps.tensorsharp.video is not None),
        api_schema=schemas.TensorSharpVideoFields,
    ),
    KindSpec(
        "tensorsharp",
        JobKind.IMAGE,
        forms.TensorSharpEditForm,
        TensorSharpEditRunner,
        Estimate(eta.ts_edit_shape, eta.ts_edit_seed),
        available=lambda caps: bool(caps.models_of_kind("image_edit")),
        api_schema=schemas.TensorSharpEditFields,
    ),
)


@cache
def _table() -> dict[tuple[str, str], KindSpec]:
    return {(s.device_kind, str(s.kind)): s for s in SPECS}


def spec_for(device_kind: str, kind: str) -> KindSpec:
    """The entry for the pair; ``ValueError`` with a sentence a person understands when there is none."""
    try:
        return _table()[(str(device_kind), str(kind))]
    except KeyError:
        from devices.models import Device

        device_label = Device.Kind(device_kind).label if device_kind in Device.Kind.values else device_kind
        kind_label = JobKind(kind).label.lower() if kind in JobKind.values else repr(kind)
        raise ValueError(f"A {device_label} cannot run {kind_label} jobs.") from None


def kinds_for(device: Any) -> list[str]:
    """Job kinds the device can run right now (what the submit page and the APIs offer), in a stable order."""
    caps = Capabilities.from_dict(device.capabilities)
    return [str(s.kind) for s in SPECS if s.device_kind == device.kind and s.available(caps)]


__all__ = ["Estimate", "KindSpec", "SPECS", "TIINY_VIDEO_LIMIT_S", "kinds_for", "spec_for"]
