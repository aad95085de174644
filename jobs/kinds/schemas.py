"""Schemas of the REST API under /api/ (django-ninja / pydantic): what goes in, what comes out.

Input schemas carry **types only**. Whether a value is acceptable (a size among the model's canvases, 1..7
seconds, a voice the model has) is the job form's business, reached through ``jobs.queue.admission``, so the API
answers with exactly the messages the web page shows. Every input schema forbids unknown fields: a typo
(``second`` for ``seconds``) is a 422 naming the field, never silently ignored.

One submit schema per (device kind, job kind), named like the forms in ``jobs.kinds.table`` (which names each
pair's); their field names are the form's field names, because the same form validates them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from typing import Any, Literal

from ninja import Schema
from pydantic import ConfigDict, Field

# The API's one error shape is hub's (every app's routes answer it); re-exported for the routes importing it here.
from hub.api_errors import ErrorOut as ErrorOut
from hub.api_types import LocalTime

When = Literal["asap", "tonight", "not_before"]


class Strict(Schema):
    model_config = ConfigDict(extra="forbid")


# ======================================================================================================
# Submission: the form fields of each (device kind, job kind)
# ======================================================================================================


class CommonFields(Strict):
    model: str | None = Field(
        default=None, description="The device's model id, e.g. `MiniMaxAI/MiniMax-H3-Turbo`."
    )
    when: When | None = Field(
        default=None, description="`asap` (default), `tonight` (the device's night window) or `not_before`."
    )
    not_before: dt.datetime | None = Field(
        default=None, description="With `when=not_before`: the earliest start (ISO 8601)."
    )
    polite: bool | None = Field(
        default=None,
        description="Default true: by day, don't unload a model someone else loaded (e.g. a chat).",
    )
    shared: bool | None = Field(default=None, description="Share the job and its results with the household.")
    lift_limits: bool | None = Field(
        default=None,
        description="Admins only: queue it even over one of your quotas (the job's story records the lift).",
    )


class TiinyVideoFields(CommonFields):
    """Tiiny ``/v1/videos``. The start image (optional) is a file: send the request as multipart/form-data."""

    prompt: str | None = None
    seed: int | None = None
    size: str | None = Field(default=None, description="One of the model's canvases, e.g. `832x480`.")
    seconds: int | None = Field(default=None, description="1 to the device's limit (7).")
    steps: int | None = Field(default=None, description="One of the model's step options.")


class TensorSharpVideoFields(CommonFields):
    """TensorSharp video. Start/end images are files: send them as multipart/form-data."""

    prompt: str | None = None
    seed: int | None = None
    width: int | None = Field(default=None, description="A multiple of 32.")
    height: int | None = Field(default=None, description="A multiple of 32.")
    frames: int | None = Field(default=None, description="Snapped to the model's frame grid.")
    ts_steps: int | None = None
    cfg: float | None = None
    video_mode: str | None = Field(default=None, description="`t2v`, `i2v` or `fl2v`, as the model supports.")
    generate_audio: bool | None = None


class MeshFields(CommonFields):
    """Tiiny 3D. ``image`` (the picture of the object) is a file: send the request as multipart/form-data."""

    simplify: bool | None = None
    texture: bool | None = None
    seed: int | None = None
    steps: int | None = None
    target_faces: int | None = None


class MusicFields(CommonFields):
    """Foundation-1 loops take ``prompt``; SongGeneration songs take ``caption`` and/or ``lyrics``."""

    prompt: str | None = None
    caption: str | None = None
    lyrics: str | None = None
    generation_type: str | None = Field(
        default=None, description="`mixed`, `bgm`, `vocal` or `separate` (songs)."
    )
    seconds: int | None = None
    steps: int | None = None
    cfg_scale: float | None = None
    seed: int | None = None


class TiinyImageFields(CommonFields):
    """Tiiny text-to-image; ``n`` images are ``n`` device requests in one job."""

    prompt: str | None = None
    seed: int | None = None
    steps: int | None = None
    negative_prompt: str | None = None
    width: int | None = Field(default=None, description="A multiple of 16.")
    height: int | None = Field(default=None, description="A multiple of 16.")
    n: int | None = None


class TensorSharpEditFields(CommonFields):
    """TensorSharp image edit. ``image`` (the picture to edit) is a file: send multipart/form-data."""

    prompt: str | None = None
    seed: int | None = None
    steps: int | None = None
    cfg: float | None = None


class SpeechFields(CommonFields):
    """Tiiny text to speech. ``ref_audio`` (a WAV to clone) is a file: send multipart/form-data."""

    input: str | None = None
    voice: str | None = None
    instruct: str | None = None
    ref_text: str | None = None
    language: str | None = None
    response_format: str | None = Field(default=None, description="`wav` (default) or `mp3`.")


#: Form fields that are files (multipart/form-data only).
FILE_FIELDS = ("start_image", "end_image", "image", "ref_audio")


#: ``device`` of ``POST /api/jobs``: a device's id pins the job to it; "any", or none, lets the pool choose.
_DEVICE_FIELD = {
    "oneOf": [{"type": "integer"}, {"type": "string", "enum": ["any"]}],
    "description": 'A device\'s id: the job runs there only. Left out or `"any"`: any capable device (the pool '
    "of every device that can do exactly this request; the first one free runs it).",
}


_PRESET_FIELD = {
    "type": "string",
    "description": "A preset's name (`GET /api/presets`): yours, else the household's. Its values are the "
    "defaults; the body's own fields override them. An unknown name is a 422 naming `preset`.",
}


#: A file field of a JSON body: another job's result (``jobs.doors.intake.result_refs``).
_FROM_JOB = {
    "type": "object",
    "description": "Another job's result as this input (a chain): the job waits until that result is stored, then "
    "takes it, fitted to what the device takes (a video's canvas). `artifact`: the result's name; left out, the "
    "job's first result that fits (a picture for an image field, a recording for `ref_audio`).",
    "properties": {
        "from_job": {"type": "integer", "minimum": 1},
        "artifact": {"type": "string", "minLength": 1, "maxLength": 200},
    },
    "required": ["from_job"],
    "additionalProperties": False,
}


def submit_body_openapi(
    pairs: Iterable[tuple[str, str, type[CommonFields]]],
    files_of: Callable[[str, str], Iterable[str]] = lambda _device_kind, _kind: (),
) -> dict[str, Any]:
    """The request body of ``POST /api/jobs`` for the docs: one of the pairs' schemas (``(device kind, job kind,
    schema)``, as ``jobs.kinds.table.api_schemas`` lists them), JSON or multipart. ``files_of``: the file fields
    of a pair's form, which a JSON body may fill with another job's result (``{"from_job": …}``)."""
    variants = []
    for device_kind, kind, schema in pairs:
        js = schema.model_json_schema()
        js["title"] = f"{schema.__name__.removesuffix('Fields')} ({device_kind} {kind})"
        js["properties"] = {
            "device": _DEVICE_FIELD,
            "kind": {"type": "string", "enum": [kind]},
            "preset": _PRESET_FIELD,
            **js.get("properties", {}),
            **{f: _FROM_JOB for f in files_of(device_kind, kind)},
        }
        js["required"] = ["kind"]
        variants.append(js)
    multipart = {
        "type": "object",
        "description": "The same fields as form fields, plus the files: "
        + ", ".join(f"`{f}`" for f in FILE_FIELDS)
        + " (as the kind uses them).",
        "properties": {
            "device": _DEVICE_FIELD,
            "kind": {"type": "string"},
            "preset": _PRESET_FIELD,
            **{f: {"type": "string", "format": "binary"} for f in FILE_FIELDS},
        },
        "required": ["kind"],
        "additionalProperties": True,
    }
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"oneOf": variants}},
                "multipart/form-data": {"schema": multipart},
            },
        }
    }


# ======================================================================================================
# Other inputs
# ======================================================================================================


class CancelIn(Strict):
    reason: str | None = Field(
        default=None, description="Optional; kept with the job (at most 300 characters)."
    )


class ShareIn(Strict):
    shared: bool


# ======================================================================================================
# Outputs
# ======================================================================================================


class JobErrorOut(Schema):
    code: str
    message: str
    detail: str = Field(description="What the device said, when it said something.")


class EventOut(Schema):
    seq: int
    at: dt.datetime
    state: str
    message: str


class ArtifactOut(Schema):
    id: int
    kind: str
    name: str
    mime: str
    bytes: int
    sha256: str
    created: dt.datetime
    download_url: str = Field(description="`GET` it (with the same auth) for the file; `Range` is honoured.")
    web_url: str


class EtaOut(Schema):
    finish: dt.datetime
    remaining_s: int


class JobOut(Schema):
    id: int
    kind: str
    state: str = Field(
        description="held (waits for another job's result), queued, scheduled, preparing, submitted, running, "
        "collecting, done, failed, cancelled, interrupted"
    )
    state_label: str
    device: int = Field(
        description="The device it runs on (or ran on); for a waiting pool job, the one it waits on for now."
    )
    device_name: str
    pinned: bool = Field(
        description="True: only `device` may run it. False: any capable device, any device of `pool`."
    )
    pool: list[int] = Field(
        description="The ids of the devices that may run it: those that admitted exactly this request at submit "
        "(a pinned job's: its device alone)."
    )
    owner: str = Field(description="The owner's username.")
    model: str
    prompt: str
    params: dict[str, Any] = Field(description="What the runner sends the device; input files by name only.")
    when: str
    not_before: dt.datetime | None
    polite: bool
    shared: bool
    progress: float
    phase: str
    estimate_s: float | None
    predicted_start: dt.datetime | None
    predicted_finish: dt.datetime | None = Field(description="The ETA: when the job is expected to be ready.")
    created: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    error: JobErrorOut | None
    cancel_reason: str
    batch: str | None = Field(
        default=None,
        description="The batch it was submitted in (`POST /api/jobs/batch`); null for a job submitted alone.",
    )
    url: str = Field(description="The job's page in the hub.")
    api_url: str


class LinkOut(Schema):
    job: int = Field(description="The other job's id.")
    field: str = Field(
        description="The file input the result feeds: start_image, end_image, image, ref_audio."
    )
    artifact: str = Field(
        description='The result\'s name: the one given to the child, or asked for; "" = its first that fits.'
    )
    released: bool = Field(description="True once the child has the result as its input.")


class JobDetailOut(JobOut):
    eta: EtaOut | None
    events: list[EventOut]
    artifacts: list[ArtifactOut]
    parents: list[LinkOut] = Field(
        description="The jobs whose results this job takes as inputs (a chain): it waits (`held`) until they are "
        "stored."
    )
    children: list[LinkOut] = Field(description="The jobs that take this job's results as inputs.")


class SubmittedOut(JobDetailOut):
    """The job as queued, with what the hub expects of it."""

    estimate_ready_at: dt.datetime | None = Field(description="Predicted finish at submission.")
    estimate_starts_at: dt.datetime | None = Field(description="Predicted start at submission.")
    warnings: list[str]


class BatchOut(Schema):
    """A batch: its id and its jobs, in the order they were given."""

    batch: str = Field(
        description="The batch's id: `GET /api/batches/{id}`, `POST /api/batches/{id}/cancel`."
    )
    summary: str = Field(description="e.g. “batch of 6: 2 done, 1 running, 3 queued”.")
    estimate_ready_at: dt.datetime | None = Field(
        default=None, description="At submission: when the last of its jobs is expected to be ready."
    )
    jobs: list[JobDetailOut]


class JobListOut(Schema):
    items: list[JobOut]
    next: str | None = Field(description="Pass as `cursor` for the next (older) page; null on the last page.")


# -- the plan (the device schemas are in devices.schemas) -----------------------------------------------------


class PlanJobOut(Schema):
    position: int = Field(description="1 = runs next.")
    id: int
    kind: str
    state: str
    owner: str
    label: str = Field(description="The prompt when you may see the job, else e.g. “Video by mia”.")
    prompt: str | None = Field(description="Null for another person's private job.")
    model: str
    device: int = Field(description="The device whose lane it waits in (for a job for any device: for now).")
    device_name: str
    pinned: bool = Field(description="False: a job for any device of its pool, which may still move lanes.")
    pool: list[int] = Field(description="The devices that may run it (a pinned job: its own).")
    when: str
    not_before: dt.datetime | None
    predicted_start: dt.datetime | None
    predicted_finish: dt.datetime | None
    line: str = Field(
        description="Where and when it is expected to run, and why there, times in the household's zone: "
        "“On Living-room Tiiny around 01:40, after mia's video · any device: Living-room Tiiny frees first”."
    )
    why_here: str = Field(
        description="Why this lane, e.g. “any device: Pocket holds its model”; empty for a pinned job that can start."
    )
    waiting_because: str = Field(description="Why it has not started yet.")
    url: str | None = Field(description="Its page, when you may see the job.")


class RunningOut(Schema):
    id: int
    kind: str
    state: str
    owner: str
    label: str
    prompt: str | None
    pinned: bool = Field(description="False: a job for any device, running on this one.")
    progress: float
    phase: str
    predicted_finish: dt.datetime | None
    url: str | None


class PlanOut(Schema):
    device: int
    device_name: str
    paused: bool
    blocked: str = Field(description="Why nothing may start on the device now; empty when something may.")
    night_start: LocalTime
    night_end: LocalTime
    running: RunningOut | None
    jobs: list[PlanJobOut]
    clear_at: dt.datetime | None = Field(description="When the whole plan is predicted to be done.")


class PoolPlanOut(Schema):
    devices: list[PlanOut] = Field(description="Every device's plan (its lane), the default device first.")
    clear_at: dt.datetime | None = Field(description="When every device's plan is predicted to be done.")
    devices_usable: int = Field(description="Devices that may start work now (not away, not paused).")
    waiting_any: int = Field(description="Waiting jobs for any device, over every lane.")


class LimitOut(Schema):
    value: int | None = Field(description="The limit in force; null: no limit.")
    own: bool = Field(description="Set for you, rather than the household's default.")


class UsageLimitsOut(Schema):
    device_minutes_per_day: LimitOut
    device_minutes_per_week: LimitOut
    max_queued: LimitOut
    storage_mb: LimitOut


class UsageDayOut(Schema):
    date: dt.date
    device_minutes: float
    stored_mb: float = Field(description="Results made that day and still kept.")


class UsageDeviceOut(Schema):
    device: int
    device_name: str
    minutes_today: float
    minutes_this_week: float
    minutes_last_14_days: float


class UsageOut(Schema):
    limits: UsageLimitsOut
    device_minutes_today: float = Field(description="Measured device time today (household day).")
    device_minutes_this_week: float = Field(
        description="Measured device time this household week, from Monday."
    )
    booked_minutes: float = Field(
        description="What your waiting and running jobs are estimated to take still."
    )
    queued: int = Field(description="Your jobs waiting or running.")
    storage_mb: float = Field(description="Your results' files, those in the trash included (they count).")
    trash_mb: float = Field(description="Of which in the trash, until it is emptied.")
    summary: str = Field(
        description="The Usage page's line, e.g. “Today 12 of 60 device minutes · …”; empty without limits."
    )
    days: list[UsageDayOut] = Field(description="The last 14 household days, oldest first.")
    devices: list[UsageDeviceOut] = Field(
        description="Your measured device time on each device (limits count the total over every device)."
    )
    household_devices: list[UsageDeviceOut] | None = Field(
        description="Admins: everyone's device time on each device; null for everyone else."
    )
