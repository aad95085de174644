from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db import models

from devices import crypto


def _default_time_zone() -> str:
    return settings.TIME_ZONE


#: A device whose requests take this long to answer (p95) has a slow link, and its pages say so.
SLOW_LINK_MS = 2000


def round_trip_text(ms: int | None) -> str:
    if ms is None:
        return ""
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


class Device(models.Model):
    """A Tiiny Pocket or a TensorSharp server the hub drives. Jobs FK to it."""

    class Kind(models.TextChoices):
        TIINY = "tiiny", "Tiiny Pocket"
        TENSORSHARP = "tensorsharp", "TensorSharp server"

    class State(models.TextChoices):
        ONLINE = "online", "Online"
        LOCKED = "locked", "Locked"
        UNREACHABLE = "unreachable", "Unreachable"
        AUTH_FAILED = "auth_failed", "API key rejected"
        UNKNOWN = "unknown", "Not checked yet"

    #: States in which nothing may start on the device (the scheduler holds its queue until they pass).
    QUEUE_BLOCKING_STATES = frozenset({State.LOCKED, State.UNREACHABLE, State.AUTH_FAILED})

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.TIINY)
    base_url = models.CharField(max_length=300)
    api_key_encrypted = models.TextField(blank=True, default="", editable=False)

    night_start = models.TimeField(default=dt.time(23, 0))
    night_end = models.TimeField(default=dt.time(7, 0))
    time_zone = models.CharField(max_length=64, default=_default_time_zone)
    #: may hub renders unload the chat model the vault's nightly memory summaries use (jobs.core.scheduler)
    may_evict_summary_model = models.BooleanField(default=False)

    state = models.CharField(max_length=20, choices=State.choices, default=State.UNKNOWN)
    state_message = models.CharField(max_length=500, blank=True, default="")
    state_fix = models.CharField(max_length=500, blank=True, default="")
    state_changed_at = models.DateTimeField(null=True, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)
    #: the round trip of the poller's requests (first byte of the answer), 95th percentile of the last ones, in ms
    #: (devices.services.device_note_round_trips); views read it, never the device
    link_p95_ms = models.IntegerField(null=True, blank=True)

    versions = models.JSONField(default=dict, blank=True)  # {"tiiny_os": "0.1.38", "version": "0.1.30"}
    capabilities = models.JSONField(default=dict, blank=True)  # devices.capabilities.Capabilities.to_dict()
    capabilities_at = models.DateTimeField(null=True, blank=True)

    # The latest reading (history lives in DeviceMetric).
    npu_util = models.FloatField(null=True, blank=True)
    npu_mem_used_mb = models.FloatField(null=True, blank=True)
    npu_mem_total_mb = models.FloatField(null=True, blank=True)
    npu_units_used = models.IntegerField(null=True, blank=True)
    npu_units_total = models.IntegerField(null=True, blank=True)
    cpu_percent = models.FloatField(null=True, blank=True)
    mem_percent = models.FloatField(null=True, blank=True)
    loaded_models = models.JSONField(default=list, blank=True)  # [{"model_id", "npu_usage", "status"}]
    reading_at = models.DateTimeField(null=True, blank=True)

    queue_paused = models.BooleanField(default=False)
    is_default = models.BooleanField(default=False)
    #: models the hub launched (polite mode evicts only these); written via services.device_note_loaded
    hub_loaded_models = models.JSONField(default=list, blank=True)
    #: {model_id: {"port", "created_at", "instance_id"}}: the instance of each of those the hub launched, as the
    #: device named it; one running as another instance was loaded again since (a restart) and is not the hub's
    hub_loaded_instances = models.JSONField(default=dict, blank=True)

    # Poll bookkeeping. ``next_poll_at`` is claimed by poll_all (one enqueue per due poll);
    # ``poll_claimed_until`` by poll_device (one poller per device whatever the number of workers);
    # ``active_until`` is set by the job engine while a job runs here (poll fast).
    next_poll_at = models.DateTimeField(null=True, blank=True)
    poll_claimed_until = models.DateTimeField(null=True, blank=True)
    active_until = models.DateTimeField(null=True, blank=True)

    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        # Never the key, not even encrypted.
        return f"<Device {self.pk} {self.name!r} {self.kind} {self.state}>"

    @property
    def round_trip_text(self) -> str:
        """The link's measured round trip (p95), ``"40 ms"`` or ``"4.2 s"``; empty before the poller measured it."""
        return round_trip_text(self.link_p95_ms)

    @property
    def slow_link_s(self) -> float | None:
        """Seconds the device takes to answer (p95) when that is slow enough to say so on its pages, else None."""
        if self.link_p95_ms is None or self.link_p95_ms < SLOW_LINK_MS:
            return None
        return round(self.link_p95_ms / 1000, 1)

    @property
    def state_detail(self) -> str:
        """The admins-only part of the state message: where the hub tried to reach the device.

        ``state_message`` and ``state_fix`` are shown to everyone who watches the device (cards on the
        dashboard, the device pages, pushes to ``everyone``); the address is an admin's business. Templates
        show this only to admins, and ``devices.live`` pushes it only to the ``admins`` group.
        """
        return f"Address: {self.base_url}" if self.state_message and self.base_url else ""

    @property
    def api_key(self) -> str:
        return crypto.decrypt(self.api_key_encrypted)

    @api_key.setter
    def api_key(self, value: str | None) -> None:
        self.api_key_encrypted = crypto.encrypt(value or "")

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_encrypted)


class DeviceMetric(models.Model):
    """A downsampled point: sums over ``samples`` readings in one bucket (averages are sum / samples).

    Sums (not averages) so that two writers can add to a bucket with one UPDATE of F() expressions.
    Values are percentages so the chart needs one axis: NPU utilisation, NPU memory, CPU, memory.
    """

    class Resolution(models.IntegerChoices):
        TEN_SECONDS = 10, "10 s"
        FIVE_MINUTES = 300, "5 min"

    device = models.ForeignKey(Device, on_delete=models.CASCADE, related_name="metrics")
    resolution = models.PositiveIntegerField(choices=Resolution.choices)
    bucket = models.DateTimeField()
    samples = models.PositiveIntegerField(default=0)
    npu_util_sum = models.FloatField(default=0)
    npu_mem_sum = models.FloatField(default=0)
    cpu_sum = models.FloatField(default=0)
    mem_sum = models.FloatField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["device", "resolution", "bucket"], name="devices_metric_bucket_uniq"
            ),
        ]
        # The unique constraint's index serves the chart query (device, resolution, bucket >= since)
        # and the pruning (resolution, bucket < cutoff) is served by this one.
        indexes = [models.Index(fields=["resolution", "bucket"], name="devices_metric_prune_idx")]

    def __str__(self) -> str:
        return f"{self.device_id}@{self.bucket:%Y-%m-%d %H:%M:%S}/{self.resolution}s"
