"""What the device layer tells or asks the apps above it (jobs, notify), without importing them.

Devices sit below jobs and notify (``pyproject.toml``: apps notify over jobs over devices) and never import them.
Where a device must tell them something, or needs an answer only they have, it calls a hook here, and the app
that knows registers it at start-up (its ``AppConfig.ready``):

* ``device_locked`` (notify): a device became locked; the household is told (``devices.services`` calls each
  hook after commit, and a hook that raises is logged, never raised).
* ``device_state_changed`` (jobs): a device went away or came back; the pool moves its jobs (called after commit,
  like ``device_locked``).
* ``device_capabilities_changed`` (jobs): what a device reports it can do changed (a device added, a model
  installed or removed); the pool's waiting jobs take it in or leave it (called after commit).
* ``job_kinds`` (jobs): the job kinds a device can run now (``/api/devices/<id>/capabilities``).
* ``jobs_ask_soon`` (jobs): will one of the device's jobs send it a request within a window of now? (The metric
  poller's optional tick then gives way: ``devices.services.device_tick_yields``.)

With nothing registered, a lock is told to nobody, a device runs no job kinds and no job is about to ask it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Protocol

from devices.models import Device


class DeviceLockedHook(Protocol):
    def __call__(self, *, device_id: int, since: dt.datetime) -> None: ...


class DeviceStateHook(Protocol):
    def __call__(self, *, device_id: int, state: str) -> None: ...


class DeviceCapabilitiesHook(Protocol):
    def __call__(self, *, device_id: int) -> None: ...


JobKinds = Callable[[Device], list[str]]
JobsAskSoon = Callable[[Device, dt.datetime, dt.timedelta], bool]

_device_locked: list[DeviceLockedHook] = []
_device_state_changed: list[DeviceStateHook] = []
_device_capabilities_changed: list[DeviceCapabilitiesHook] = []
_job_kinds: list[JobKinds] = []  # at most one: the latest registration
_jobs_ask_soon: list[JobsAskSoon] = []  # at most one: the latest registration


def register_device_locked(hook: DeviceLockedHook) -> None:
    """``hook(device_id=..., since=...)`` runs after the commit that records a device as locked."""
    if hook not in _device_locked:
        _device_locked.append(hook)


def device_locked_hooks() -> tuple[DeviceLockedHook, ...]:
    return tuple(_device_locked)


def register_device_state_changed(hook: DeviceStateHook) -> None:
    """``hook(device_id=..., state=...)`` runs after the commit that records a device's new state."""
    if hook not in _device_state_changed:
        _device_state_changed.append(hook)


def device_state_hooks() -> tuple[DeviceStateHook, ...]:
    return tuple(_device_state_changed)


def register_device_capabilities_changed(hook: DeviceCapabilitiesHook) -> None:
    """``hook(device_id=...)`` runs after the commit that stores capabilities differing from the stored ones."""
    if hook not in _device_capabilities_changed:
        _device_capabilities_changed.append(hook)


def device_capabilities_hooks() -> tuple[DeviceCapabilitiesHook, ...]:
    return tuple(_device_capabilities_changed)


def register_job_kinds(answer: JobKinds) -> None:
    _job_kinds[:] = [answer]


def job_kinds(device: Device) -> list[str]:
    """The job kinds ``device`` can run now (none when no app answers)."""
    return [kind for answer in _job_kinds for kind in answer(device)]


def register_jobs_ask_soon(answer: JobsAskSoon) -> None:
    _jobs_ask_soon[:] = [answer]


def jobs_ask_soon(device: Device, now: dt.datetime, window: dt.timedelta) -> bool:
    """Will one of ``device``'s jobs send it a request within ``window`` of ``now`` (either side)?"""
    return any(answer(device, now, window) for answer in _jobs_ask_soon)
