"""How often a render is polled (``jobs.queue.pacing.interval_for``), on a fake clock: sparse far from its end, fast
near it, so its end is seen within a fraction of a second for a handful of requests (issue 13)."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest
from django.utils import timezone

from jobs.models import Job, RenderStat
from jobs.queue import pacing

pytestmark = pytest.mark.django_db
VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"
PARAMS = {"prompt": "fox", "size": "832x480", "seconds": 2, "steps": 4}
NO_STAGES = SimpleNamespace()


@pytest.fixture(autouse=True)
def production_rhythm(settings):
    settings.JOBS_POLL_INTERVAL_S, settings.JOBS_POLL_MAX_S, settings.JOBS_POLL_MIN_S = 2.0, 20.0, 0.15


@pytest.fixture
def job(pocket, member):
    return Job.objects.select_related("device").get(
        pk=Job.objects.create(
            owner=member,
            device=pocket,
            kind="video",
            model_id=VIDEO,
            params=PARAMS,
            state="running",
            submit_started_at=timezone.now(),
        ).pk
    )


@pytest.fixture
def clock(monkeypatch, job):
    t0 = job.submit_started_at
    now = {"t": 0.0}
    monkeypatch.setattr(pacing, "_now", lambda: t0 + dt.timedelta(seconds=now["t"]))
    return now


def history(job, mean_s: float, samples: int) -> None:
    from jobs.kinds.table import shape_of

    RenderStat.objects.create(
        device=job.device,
        kind="video",
        model_id=VIDEO,
        shape=shape_of("tiiny", "video", VIDEO, PARAMS),
        samples=samples,
        mean_s=mean_s,
    )


def render(job, clock, length: float, *, startup: float = 0.5, tail: float = 0.0) -> tuple[int, float]:
    """Poll a render of ``length`` s (whole-percent progress after ``startup`` s, then ``tail`` s at 99 %) by the
    engine's rule until it is seen done: (polls, seconds between its end and the poll that saw it)."""
    end = startup + length + tail
    polls = 0
    wait = pacing.first_interval(job, NO_STAGES)
    while True:
        clock["t"] += wait
        polls += 1
        t = clock["t"]
        if t >= end:
            return polls, t - end
        now = 0.0 if t < startup else min(99.0, float(int((t - startup) / length * 100)))
        moved, job.progress = now > job.progress, now
        # As the engine does after each poll (``_on_poll``): its own memory of the job is in ``remote_data``.
        wait = pacing.next_interval(job, moved, runner=NO_STAGES)


@pytest.mark.parametrize("length", [28.0, 84.0, 420.0])
def test_a_render_costs_a_handful_of_polls_and_its_end_is_seen_within_a_fraction_of_a_second(
    job, clock, length
):
    polls, late = render(job, clock, length)
    # Before: 22, 29 and 55 polls (a ramp-up while progress was under 5 %, the far rule at half the time run).
    assert polls <= {28.0: 17, 84.0: 22, 420.0: 38}[length]
    # Whole-percent progress: the end is known to about 1 % of the render (4 s of a 7-minute one).
    assert late <= 0.3 + length / 100 * 0.5


def test_a_render_under_way_is_not_polled_at_the_ramp_up_rate(job, clock):
    clock["t"], job.progress = 1.0, 2.0  # moving, but too little done to trust its own rate
    assert pacing.interval_for(job, NO_STAGES, stalls=0) == pytest.approx(0.5)  # half the time run; was 0.3


def test_nothing_known_yet_starts_fast(job, clock):
    assert pacing.interval_for(job, NO_STAGES, stalls=0) == pytest.approx(0.15)
    history(job, 420.0, samples=1)  # one sample is not trusted to push the first polls out
    assert pacing.interval_for(job, NO_STAGES, stalls=0) == pytest.approx(0.15)


def test_a_trusted_history_spaces_the_first_polls(job, clock):
    history(job, 100.0, samples=2)
    assert pacing.interval_for(job, NO_STAGES, stalls=0) == pytest.approx(pacing.START_SHARE * 100.0)
    polls, late = render(job, clock, 95.0)
    assert late <= 0.3 + 0.5
    assert polls <= 16


def test_a_render_that_sits_at_99_percent_is_still_seen_within_the_fast_poll(job, clock):
    polls, late = render(job, clock, 28.0, tail=1.0)
    assert late <= 0.15 + 1e-6


def test_once_a_quarter_is_done_it_may_wait_as_long_as_it_has_run(job, clock):
    clock["t"], job.progress = 10.0, 30.0  # ends in ~23 s by its own rate
    assert pacing.interval_for(job, NO_STAGES, stalls=0) == pytest.approx(10.0)  # was 5 (half the time run)


def renders(job, clock, length: float, runs: int = 10, **kw) -> list[tuple[int, float]]:
    """``render`` at ``runs`` lengths and start-ups around ``length`` (where the polls fall in each percent)."""
    out = []
    for k in range(runs):
        Job.objects.filter(pk=job.pk).update(remote_data={})
        job.remote_data, job.progress, clock["t"] = {}, 0.0, 0.0
        out.append(render(job, clock, length + k * 0.37, startup=0.3 + 0.13 * k, **kw))
    return out


def test_the_end_of_a_long_render_is_seen_from_when_each_percent_was_first_read(job, clock):
    """A 7-minute render reads whole percents: the percent a poll reads is up to 4.2 s old. The end is foretold
    from when each was first read (between two polls), so it is seen within two fast polls."""
    runs = renders(job, clock, 420.0)
    late = sorted(late for _, late in runs)
    # Before: 0.06 to 1.56 s late (median 0.69), 365 polls for the ten.
    assert sum(late <= 0.3 for late in late) >= 9, late
    assert late[len(late) // 2] <= 0.3
    assert sum(polls for polls, _ in runs) <= 372  # 365 before, give or take one poll in five renders
    assert max(polls for polls, _ in runs) <= 39


def test_a_later_stage_is_paced_from_its_own_polls(job, clock):
    """A multi-stage job: its memory of the pace belongs to the stage (its ``remote_id``), read through the
    runner's ``stage_progress``; the second stage's end is seen as soon as a single render's."""
    stages = SimpleNamespace(stage_progress=lambda p: (float(p) / 100.0 * 2 - 1, 0.5))
    runs = renders(job, clock, 420.0, runs=1)  # the first stage: whole-job progress 0..99
    start = job.submit_started_at + dt.timedelta(seconds=clock["t"])
    Job.objects.filter(pk=job.pk).update(remote_id="stage-2", submit_started_at=start)
    job.remote_id, job.submit_started_at, job.progress = "stage-2", start, 50.0
    t0, end, wait, polls = clock["t"], clock["t"] + 0.5 + 210.0, pacing.first_interval(job, stages), 0
    while clock["t"] < end:
        clock["t"] += wait
        polls += 1
        share = min(0.99, max(0.0, int((clock["t"] - t0 - 0.5) / 210.0 * 100) / 100.0))
        moved, job.progress = 50.0 + share * 50.0 > job.progress, 50.0 + share * 50.0
        wait = pacing.next_interval(job, moved, runner=stages)
    assert clock["t"] - end <= 0.3 and runs[0][1] <= 0.3
    assert polls <= 28  # 27 before
    assert job.remote_data["pace"]["id"] == "stage-2"  # the first stage's pace says nothing of this one
    assert job.remote_data["pace"]["progress"] == job.progress  # what the last poll read (``eta.read_at``)


@pytest.mark.parametrize(
    ("hist", "most"),
    [
        (None, 140),  # 151 before
        ((3.0, 1), 145),  # a sample learned at another speed (10x shorter): 640 before, polled at the floor
        ((10.8, 2), 120),  # a trusted history, 2.6x too short: 275 before
    ],
)
def test_a_render_at_a_known_pace_sleeps_to_just_before_its_end(job, clock, hist, most):
    """A 28 s render (the emulator's speed 15 makes a 7-minute render that short, issue 13). Once its own pace is
    known, the end that pace foretells decides: no history pulls the polls in, it sleeps to just before the
    earliest end and polls densely only in the window left around it, and its end is still seen at once."""
    if hist:
        history(job, *hist)
    runs = renders(job, clock, 28.0)
    late = sorted(late for _, late in runs)
    assert sum(polls for polls, _ in runs) <= most
    assert max(polls for polls, _ in runs) <= 16
    assert late[-1] <= 0.3 and late[len(late) // 2] <= 0.2, late
