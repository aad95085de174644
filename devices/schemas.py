"""What the device routes of the REST API answer (``devices.api``; django-ninja / pydantic)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ninja import Schema
from pydantic import Field

from hub.api_types import LocalTime


class LoadedModelOut(Schema):
    model_id: str
    name: str
    npu_usage: int | None
    share: float | None = Field(description="Percent of the NPU budget.")
    status: str
    by_hub: bool = Field(description="The hub loaded it (polite mode only ever unloads these).")


class DeviceOut(Schema):
    id: int
    name: str
    kind: str
    usable: bool = Field(
        True, description="Whether your groups let you send work to it (everyone may watch it)."
    )
    kind_label: str
    state: str = Field(description="online, locked, unreachable, auth_failed, unknown")
    state_label: str
    state_message: str
    state_fix: str
    state_changed_at: dt.datetime | None
    last_seen: dt.datetime | None
    versions: dict[str, Any]
    is_default: bool
    queue_paused: bool
    night_start: LocalTime
    night_end: LocalTime
    time_zone: str
    loaded_models: list[LoadedModelOut]
    url: str | None = Field(description="The device's address: admins only (null for everyone else).")
    api_url: str


class GaugeOut(Schema):
    value: float | None
    max: float
    pct: int | None


class MetricsOut(Schema):
    reading_at: dt.datetime | None
    npu_util: float | None
    npu_mem_used_mb: float | None
    npu_mem_total_mb: float | None
    npu_units_used: int | None
    npu_units_total: int | None
    cpu_percent: float | None
    mem_percent: float | None
    gauges: dict[str, GaugeOut]
    loaded_models: list[LoadedModelOut]


class MetricPointOut(Schema):
    t: dt.datetime
    npu_util: float | None
    npu_mem: float | None
    cpu: float | None
    mem: float | None


class MetricHistoryOut(Schema):
    hours: int
    resolution_s: int
    points: list[MetricPointOut] = Field(description="Averages per bucket, in percent, oldest first.")


class VoicesOut(Schema):
    mode: str = Field(description="preset, instruct, clone or broken")
    voices: list[str]
    note: str


class CapabilitiesOut(Schema):
    kind: str
    usable: bool = Field(
        True,
        description="Whether your groups let you use this device (if not, no models or kinds are listed).",
    )
    job_kinds: list[str] = Field(description="What the device can run now (what POST /api/jobs accepts).")
    models: list[dict[str, Any]]
    video: dict[str, dict[str, Any]] = Field(
        description="Per video model: canvases, step options, max seconds…"
    )
    stages_3d: list[str]
    voices: dict[str, VoicesOut] = Field(description="Per speech model.")
    npu_total: int | None
    npu_available: int | None
    tensorsharp: dict[str, Any] | None
    captured_at: dt.datetime | None
