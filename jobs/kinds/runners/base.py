"""What every runner shares: the device client, model loading, the poll result and the stop signal.

A runner is small and stateless between calls; everything it must remember lives on the Job row
(``remote_id``, ``remote_data``), so any worker can pick the job up after a restart. Device calls only go
through ``devices.clients``; the engine (``jobs.queue.engine``) owns transitions, the lease and error policy. Result
and input files go through the store (``jobs.files.store``: ``save_artifact``, ``input_bytes``, ``work_path``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from devices import errors
from jobs.models import Job

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
