"""What differs per (device kind, job kind), in one table: the form, the runner, the estimate shape, the API schema.

The table owns every lookup of it (``form_class_for``, ``runner_for``, ``style_of``, ``schema_for``, ``shape_of``,
``seed_seconds``...): the doors, the admission service, the engine and the planner ask here, and the parts it names
(forms, runners, schemas, estimates) never look it up, so adding a kind (or a device kind) is one entry instead of
a branch in each of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from devices.capabilities import Capabilities
from devices.models import Device
from devices.services import client_for
from jobs.kinds import estimates, forms, schemas
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
            estimates.tiiny_video_shape,
            estimates.tiiny_video_seed,
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
        Estimate(estimates.mesh_shape, estimates.mesh_seed),
        api_schema=schemas.MeshFields,
    ),
    KindSpec(
        "tiiny",
        JobKind.MUSIC,
        forms.MusicForm,
        TiinyMusicRunner,
        Estimate(estimates.music_shape, estimates.music_seed),
        api_schema=schemas.MusicFields,
    ),
    KindSpec(
        "tiiny",
        JobKind.IMAGE,
        forms.TiinyImageForm,
        TiinyImageRunner,
        Estimate(estimates.tiiny_image_shape, estimates.tiiny_image_seed),
        api_schema=schemas.TiinyImageFields,
    ),
    KindSpec(
        "tiiny",
        JobKind.SPEECH,
        forms.SpeechForm,
        TiinySpeechRunner,
        Estimate(estimates.speech_shape, estimates.speech_seed),
        api_schema=schemas.SpeechFields,
    ),
    KindSpec(
        "tensorsharp",
        JobKind.VIDEO,
        forms.TensorSharpVideoForm,
        TensorSharpVideoRunner,
        Estimate(estimates.ts_video_shape, estimates.ts_video_seed),
        available=lambda caps: bool(caps.tensorsharp and caps.tensorsharp.video is not None),
        api_schema=schemas.TensorSharpVideoFields,
    ),
    KindSpec(
        "tensorsharp",
        JobKind.IMAGE,
        forms.TensorSharpEditForm,
        TensorSharpEditRunner,
        Estimate(estimates.ts_edit_shape, estimates.ts_edit_seed),
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
        device_label = Device.Kind(device_kind).label if device_kind in Device.Kind.values else device_kind
        kind_label = JobKind(kind).label.lower() if kind in JobKind.values else repr(kind)
        raise ValueError(f"A {device_label} cannot run {kind_label} jobs.") from None


def kinds_for(device: Any) -> list[str]:
    """Job kinds the device can run right now (what the submit page and the APIs offer), in a stable order."""
    caps = Capabilities.from_dict(device.capabilities)
    return [str(s.kind) for s in SPECS if s.device_kind == device.kind and s.available(caps)]


# -- the lookups: what the rest of the hub asks of the table ----------------------------------------------------


def form_class_for(device_kind: str, kind: str) -> type[forms.JobForm]:
    """The submit form of the pair."""
    return spec_for(device_kind, kind).form


def style_of(device_kind: str, kind: str) -> str:
    """How the pair's runner works the device: "poll" | "blocking" | "stream"."""
    return spec_for(device_kind, kind).style


def runner_for(job: Any) -> Runner:
    """The job's runner, with a client for its device."""
    return spec_for(job.device.kind, job.kind).runner(job, client_for(job.device))


def schema_for(device_kind: str, kind: str) -> type[schemas.CommonFields] | None:
    """The pair's input schema of ``POST /api/jobs`` (None for a pair no device kind runs)."""
    try:
        return spec_for(device_kind, kind).api_schema
    except ValueError:
        return None


def api_schemas() -> list[tuple[str, str, type[schemas.CommonFields]]]:
    """(device kind, job kind, input schema) of every pair, in the table's order (the API docs list them)."""
    return [(s.device_kind, str(s.kind), s.api_schema) for s in SPECS if s.api_schema is not None]


def file_fields_of(device_kind: str, kind: str) -> list[str]:
    """The file inputs a pair's form may take (its upload fields; some only for some models)."""
    from django.forms import FileField

    form_class = form_class_for(device_kind, kind)
    return [name for name, f in form_class.base_fields.items() if isinstance(f, FileField)]


def shape_of(device_kind: str, kind: str, model_id: str, params: dict[str, Any]) -> str:
    """The key that groups renders of comparable cost (what ``RenderStat`` learns under)."""
    return spec_for(device_kind, kind).estimate.shape(model_id, params)


def seed_seconds(device_kind: str, kind: str, model_id: str, params: dict[str, Any]) -> float:
    """Device-seconds from the reference's numbers, before any history exists."""
    return spec_for(device_kind, kind).estimate.seed(model_id, params)


__all__ = [
    "file_fields_of",
    "Estimate",
    "KindSpec",
    "SPECS",
    "TIINY_VIDEO_LIMIT_S",
    "api_schemas",
    "form_class_for",
    "kinds_for",
    "runner_for",
    "schema_for",
    "seed_seconds",
    "shape_of",
    "spec_for",
    "style_of",
]
