"""A 3D job's progress moves with time across its stages: the plans read "what is left" from it."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from jobs.kinds.estimates import STAGE_3D_SECONDS
from jobs.kinds.runners.tiiny import TiinyMeshRunner
from jobs.queue.eta import remaining_seconds

SHAPE, EXPORT = STAGE_3D_SECONDS["shape"], STAGE_3D_SECONDS["export"]


class Device3D:
    def __init__(self, status: str, progress: float) -> None:
        self.task = {"status": status, "progress": progress}

    def task3d_get(self, task_id: str) -> dict:
        return self.task


def runner(stage_index: int, status: str, progress: float) -> TiinyMeshRunner:
    job = SimpleNamespace(
        params={"stages": ["shape", "export"]},
        remote_data={"stage_index": stage_index},
        remote_id="t1",
        device=None,
    )
    return TiinyMeshRunner(job, Device3D(status, progress))


@pytest.mark.parametrize(
    ("stage", "status", "pct", "seconds_done"),
    [
        (0, "running", 0, 0.0),
        (0, "running", 50, SHAPE / 2),
        (0, "succeeded", 100, SHAPE),
        (1, "running", 0, SHAPE),
        (1, "running", 40, SHAPE + 0.4 * EXPORT),
        (1, "succeeded", 100, SHAPE + EXPORT),
    ],
)
def test_progress_is_the_share_of_the_jobs_time_done(stage, status, pct, seconds_done):
    r = runner(stage, status, pct)
    progress = r.poll().progress
    assert progress == pytest.approx(seconds_done / (SHAPE + EXPORT) * 100)
    # and the poll rhythm reads the stage back from it
    done, share = r.stage_progress(progress)
    assert done == pytest.approx(pct / 100)
    assert share == pytest.approx((SHAPE, EXPORT)[stage] / (SHAPE + EXPORT))


def test_what_is_left_after_the_shape_is_the_export():
    """By stage count the job was half done when its 7-minute shape ended, and the plans saw half of it left (a
    pool's lane freed 3.5 minutes later than it did, in bench_pool)."""
    progress = runner(1, "running", 0).poll().progress
    job = SimpleNamespace(estimate_s=SHAPE + EXPORT, progress=progress, remote_data={})
    left = remaining_seconds(job, now=dt.datetime.now(dt.UTC))
    assert left == pytest.approx(EXPORT)
