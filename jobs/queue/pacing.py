"""The poll rhythm of a poll-style render: when to ask the device again.

Near the end of a render (or of a multi-stage job's stage) the polls come every ``JOBS_POLL_MIN_S``, far from it
up to ``JOBS_POLL_MAX_S``: an early poll costs one request, a late one costs device time. Where the end lies
comes from the job's own progress (once its pace is known, the window its pace leaves, ``_paced_end``) or from
its shape's history (``jobs.queue.eta``). The engine's memory of each poll is kept in the job's ``remote_data``
(``stalls``, ``pace``).
"""

from __future__ import annotations

import datetime as dt
import itertools
from types import SimpleNamespace
from typing import Any

from django.conf import settings
from django.utils import timezone

from jobs.kinds.table import shape_of
from jobs.models import Job, RenderStat
from jobs.queue.eta import remaining_seconds


def _now() -> dt.datetime:
    return timezone.now()


#: Poll when this share of the time left to the end of the render (or stage) has passed: far from the end the
#: polls are rare, near it they come every ``JOBS_POLL_MIN_S``; an estimate up to 1/share too long still sees
#: the end within one fast poll.
NEAR_SHARE = 0.4
#: ... and this share once the job's own progress has covered ``OWN_RATE_SURE_AT`` of the render (or stage): its
#: own rate then says when it ends to within a few percent, and the last stretch takes fewer polls. From then on
#: the far rule allows waiting as long as the render has run (``SURE_FAR_SHARE``), not half of it.
SURE_NEAR_SHARE = 0.6
SURE_FAR_SHARE = 1.0
OWN_RATE_SURE_AT = 0.25
SURE_UNTIL_LEFT = 0.05
#: The job's own progress rate is trusted once this share of the render (or stage) is done: the first percent
#: comes after the device's own start-up and says little.
OWN_RATE_FROM = 0.05
#: A shape's history is trusted to say how long a render (or stage) at least lasts once it has this many samples:
#: until the job's own progress shows, it is then polled every ``START_SHARE`` of that time at the most often
#: (not from the first fraction of a second: a render its history says lasts minutes is not over after 0.3 s).
TRUSTED_SAMPLES = 2
START_SHARE = 0.05


#: How many of the latest polls ``_note_pace`` keeps (what each read, and when), and of the first trusted ones.
PACE_KEEP = 8
PACE_EARLY = 4
#: The end its pace foretells is trusted to this share of the time left, beyond what the polls leave open
#: (progress is not quite even): until then the polls wait for the earliest end that allows.
PACE_SLACK = 0.02
#: Within the window its pace leaves for the end, poll every this many ``JOBS_POLL_MIN_S``: the end is seen
#: within that, for half the polls.
PACE_STRIDE = 2
#: Once its pace is known, the far rule allows waiting this many times as long as the render has run (an end
#: far earlier than its pace says, a render that failed, is seen within 1 + this times its time; beyond
#: ``JOBS_POLL_MAX_S`` / this of a render, the cap decides).
PACED_FAR_SHARE = 2.0


def stored_remote_data(job: Job) -> dict[str, Any]:
    data = Job.objects.filter(pk=job.pk).values_list("remote_data", flat=True).first()
    return data if isinstance(data, dict) else dict(job.remote_data or {})


def _progress_and_history(
    job: Job, runner, now: dt.datetime
) -> tuple[float | None, float | None, float, tuple[float, float | None, tuple[float, float] | None]]:
    """Seconds until the render (or, for a multi-stage job, the current stage) should end: (from the job's own
    progress since it was sent, from its shape's history through ``jobs.queue.eta``; None where nothing says), the
    seconds since it was sent, and (the share of the render or stage done, how long its trusted history says
    the whole render or stage takes: None below ``TRUSTED_SAMPLES``, the window its pace leaves for the end:
    seconds from now to the earliest and to the latest end it allows, None without a pace). With a pace the
    history is not read: the job's own progress says more about this render than its shape's past ones."""
    done, share = _done_and_share(job, runner)
    elapsed = (now - job.submit_started_at).total_seconds() if job.submit_started_at else 0.0
    own = elapsed * (1.0 - done) / done if done >= OWN_RATE_FROM and elapsed > 0 else None
    paced = _paced_end(job, done) if own is not None else None
    if paced is not None:
        end, margin = paced
        margin += PACE_SLACK * max(0.0, end - elapsed)
        window = (end - margin - elapsed, end + margin - elapsed)
        # Before the end its pace foretells, the time to it; past it (the pace was wrong: a slower last
        # stretch), the time since the latest end it allowed, never more than the rate since it was sent says.
        own = end - elapsed if window[1] >= 0 else min(-window[1], own)
        return own, None, elapsed, (done, None, window)
    history = None
    shape = shape_of(job.device.kind, job.kind, job.model_id, job.params)
    learned, samples = (
        RenderStat.objects.filter(
            device_id=job.device_id, kind=job.kind, model_id=job.model_id, shape=shape, samples__gt=0
        )
        .values_list("mean_s", "samples")
        .first()
    ) or (None, 0)
    if learned:
        # The shape's history as it is now (the job's own estimate was fixed when it was queued).
        if share >= 1.0:
            seen = SimpleNamespace(estimate_s=learned, progress=job.progress, remote_data=job.remote_data)
            history = remaining_seconds(seen, now=now)
        else:
            history = learned * share * (1.0 - done)
    trusted = learned * min(share, 1.0) if learned and samples >= TRUSTED_SAMPLES else None
    return own, history, elapsed, (done, trusted, None)


def _done_and_share(job: Job, runner) -> tuple[float, float]:
    """(The share of the render or, for a multi-stage job, its current stage done; that stage's share of the job.)"""
    stage = getattr(runner, "stage_progress", None)
    done, share = stage(job.progress) if stage else (float(job.progress or 0.0) / 100.0, 1.0)
    return min(max(done, 0.0), 1.0), share


def _note_pace(job: Job, runner, data: dict[str, Any], now: dt.datetime) -> dict[str, Any]:
    """``data`` (the job's ``remote_data``) with this poll noted under ``pace``: what the latest polls read and
    when, the smallest step progress was seen to move by, and when the first trusted value was crossed into
    (between the poll that first read it and the one before). Kept per render or stage (its ``remote_id``),
    in seconds since it was sent."""
    if not job.submit_started_at:
        return data
    t = round((now - job.submit_started_at).total_seconds(), 3)
    done = round(_done_and_share(job, runner)[0], 5)
    pace = data.get("pace")
    if not isinstance(pace, dict) or pace.get("id") != job.remote_id or not pace.get("polls"):
        pace = {"id": job.remote_id, "polls": [[0.0, 0.0]]}
    polls = list(pace["polls"])
    last_t, last_done = polls[-1]
    # A copy: ``data`` is compared with the result. ``progress``: the job's, as this poll read it (``eta.read_at``).
    pace = {**pace, "polls": [*polls, [t, done]][-PACE_KEEP:], "progress": float(job.progress or 0.0)}
    if done >= OWN_RATE_FROM and len(pace.get("early") or []) < PACE_EARLY:
        pace["early"] = [*(pace.get("early") or []), [t, done]]  # the far end of its rate
    if done > last_done:
        pace["step"] = round(min(done - last_done, pace.get("step") or 1.0), 5)
        cross = [done, last_t, t]
        pace["crossed"] = [*(pace.get("crossed") or []), cross][-PACE_KEEP:]
        if not pace.get("first") and done >= OWN_RATE_FROM:
            pace["first"] = cross  # the first value that says more than the device's own start-up
    return {**data, "pace": pace}


def _paced_end(job: Job, done: float) -> tuple[float, float] | None:
    """When (seconds since it was sent) the render or stage should end by the pace ``_note_pace`` noted, and
    how far off that may be; None until its rate spans ``OWN_RATE_FROM``, or while the progress read is not
    the latest noted. A poll that read ``d`` at ``t`` says the device crossed into ``d`` before ``t`` and into
    ``d + step`` after it: at its rate the end lies in a window one step wide, however far apart the polls;
    the latest polls fall at different points of their steps, and where their windows overlap the end lies
    in all of them (the percent a poll happens to read is up to a whole step old: 4 s of a 7-minute render)."""
    read = _read_pace(job, done)
    if read is None:
        return None
    pace, first, crossed, polls, step = read
    bounds = _pace_bounds(pace, step)
    if bounds is not None:
        return (bounds[0] + bounds[1]) / 2.0, (bounds[1] - bounds[0]) / 2.0
    return _end_by_rate(first, crossed, polls, step)


#: (the value crossed into, the latest time before it was read, the earliest after)
_Crossing = tuple[float, float, float]


def _read_pace(
    job: Job, done: float
) -> tuple[dict[str, Any], _Crossing, list[_Crossing], list[tuple[float, float]], float] | None:
    """The pace noted for the job's current render or stage, as numbers: (the noted pace, its first trusted
    crossing, the crossings ``OWN_RATE_FROM`` beyond it, the polls, the step); None while it says nothing yet
    (no trusted crossing, none beyond it, or the progress read is not the latest noted)."""
    pace = (job.remote_data or {}).get("pace") if isinstance(job.remote_data, dict) else None
    if not isinstance(pace, dict) or pace.get("id") != job.remote_id or not pace.get("first"):
        return None
    try:
        d0, lo0, hi0 = map(float, pace["first"])
        crossed = [tuple(map(float, c)) for c in pace["crossed"] if float(c[0]) - d0 >= OWN_RATE_FROM]
        polls, step = [tuple(map(float, p)) for p in pace["polls"]], float(pace["step"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    if abs(polls[-1][1] - round(done, 5)) > 1e-6 or not crossed or step <= 0:
        return None
    return pace, (d0, lo0, hi0), crossed, polls, step


def _end_by_rate(
    first: _Crossing, crossed: list[_Crossing], polls: list[tuple[float, float]], step: float
) -> tuple[float, float] | None:
    """Where an even pace fits no corner (``_pace_bounds``): the end and how far off it may be by its rate from
    the first trusted crossing to the latest one known most narrowly for the span between them."""
    d0, lo0, hi0 = first
    d1, lo1, hi1 = min(crossed, key=lambda c: (c[2] - c[1] + hi0 - lo0) / (c[0] - d0))
    whole = ((lo1 + hi1) - (lo0 + hi0)) / 2.0 / (d1 - d0)  # seconds for the whole render or stage
    if whole <= 0:
        return None
    off = ((hi0 - lo0) + (hi1 - lo1)) / 2.0 / (d1 - d0)  # ... give or take this (its ends' windows)
    # Each window, widened by what the rate leaves open over the rest of the render after it.
    windows = [(lo + (1.0 - d) * whole, hi + (1.0 - d) * whole, 1.0 - d) for d, lo, hi in crossed]
    windows += [(t + (1.0 - d - step) * whole, t + (1.0 - d) * whole, 1.0 - d) for t, d in polls]
    lo_end = max(lo - rest * off for lo, _, rest in windows)
    hi_end = min(hi + rest * off for _, hi, rest in windows)
    if lo_end > hi_end:  # they disagree (progress is not quite even): trust the latest poll
        lo, hi, rest = windows[-1]
        lo_end, hi_end = lo - rest * off, hi + rest * off
    return (lo_end + hi_end) / 2.0, (hi_end - lo_end) / 2.0


_INF = float("inf")


def _pace_bounds(pace: dict[str, Any], step: float) -> tuple[float, float] | None:
    """The earliest and latest end (seconds since sent) an even pace allows: the device crossed into ``x`` at
    ``start + x * whole``, and every noted poll and crossing bounds that (a poll that read ``d`` at ``t``: into
    ``d`` by ``t``, into ``d + step`` after it). Two unknowns, so the bounds are at the corners where two of
    those limits meet. None where they disagree (progress is not even) or leave the end open."""
    limits = _pace_limits(pace, step)
    lines = [(x, v) for x, lo, hi in limits for v in (lo, hi) if abs(v) != _INF]
    corners = (_corner_end(a, b, limits) for a, b in itertools.combinations(lines, 2))
    ends = [end for end in corners if end is not None]
    return (min(ends), max(ends)) if ends else None


def _pace_limits(pace: dict[str, Any], step: float) -> list[tuple[float, float, float]]:
    """What the noted polls and crossings say of ``start + x * whole``: it lies in (lo, hi] for each (x, lo, hi)."""
    limits: list[tuple[float, float, float]] = []
    for t, d in [*(pace.get("early") or []), *pace["polls"]]:
        if float(d) >= OWN_RATE_FROM:
            limits += [(float(d), -_INF, float(t)), (float(d) + step, float(t), _INF)]
    for d, lo, hi in [pace["first"], *pace["crossed"]]:
        if float(d) >= OWN_RATE_FROM:
            limits.append((float(d), float(lo), float(hi)))
    return limits


def _corner_end(
    a: tuple[float, float], b: tuple[float, float], limits: list[tuple[float, float, float]]
) -> float | None:
    """The end where two limits meet (each: crossed into ``x`` at ``v``), if an even pace through that corner
    keeps within every limit; else None."""
    (x1, v1), (x2, v2) = a, b
    if abs(x1 - x2) < 1e-9:
        return None
    whole = (v1 - v2) / (x1 - x2)
    start = v1 - x1 * whole
    if whole > 0 and all(lo - 1e-6 <= start + x * whole <= hi + 1e-6 for x, lo, hi in limits):
        return start + whole
    return None


def first_interval(job: Job, runner) -> float:
    return interval_for(job, runner, stalls=0)


def interval_for(job: Job, runner, *, stalls: int) -> float:
    """Near the end (by the job's own progress or its shape's history, whichever says sooner: an early poll
    costs one request, a late one costs device time) every ``JOBS_POLL_MIN_S``, far from it up to
    ``JOBS_POLL_MAX_S``. Until the job's own progress shows, start fast (a short stage may be over already)
    and slow to the base rate: history alone (a whole job's time, load and download included) is not trusted
    to push the first polls out. Once its pace is known, ``_paced_interval``."""
    floor = min(settings.JOBS_POLL_MIN_S, settings.JOBS_POLL_INTERVAL_S)
    base, cap = settings.JOBS_POLL_INTERVAL_S, settings.JOBS_POLL_MAX_S
    own, history, elapsed, (done, trusted, window) = _progress_and_history(job, runner, _now())
    if window is not None and own is not None:
        return _paced_interval(own, elapsed, window, floor=floor, cap=cap)
    start = min(base, 2 * floor * 1.5**stalls)
    sure = own is not None and done >= OWN_RATE_SURE_AT
    # Its own rate knows the end to about a percent of the render (whole-percent progress): in the last few
    # percent the time left is mostly that uncertainty, and the closer rule sees the end sooner.
    share = SURE_NEAR_SHARE if sure and own > SURE_UNTIL_LEFT * elapsed / done else NEAR_SHARE
    near = [max(floor, share * left) for left in (own, history) if left is not None]
    # Never wait longer than half the time the render has run so far: an end far earlier than expected is seen
    # within 1.5 times its time (twice, once its own progress is sure; with a trusted history and no progress
    # yet, within START_SHARE of what that says), whatever the estimates say.
    far = min(cap, max(floor, (SURE_FAR_SHARE if sure else 0.5) * elapsed))
    if own is None and trusted:
        return min([min(cap, max(far, START_SHARE * trusted - elapsed)), *near])
    if own is None and done <= 0:
        # Nothing is known yet: start fast (a short stage may be over already). Once its progress moves, the
        # render is under way and the far rule alone paces the polls until its own rate can be trusted.
        return min([start, far, *near])
    return min([far, *near])


def _paced_interval(
    own: float, elapsed: float, window: tuple[float, float], *, floor: float, cap: float
) -> float:
    """The wait once the job's pace says the end lies ``window`` away (seconds from now to the earliest and to
    the latest end it allows; ``own``: to the end it foretells, or once past the latest, the time since it,
    at most what its rate says is left). Its own progress decides alone (a shape's history, learned at another
    speed or for another load, only pulled the polls in for nothing): sleep to just before the earliest end
    (or ``SURE_NEAR_SHARE`` of the way to the end foretold where the window is wider than that leaves, never
    past its latest end), capped by the far rule only, then poll every ``PACE_STRIDE`` fast polls inside the
    window, and past it every fast poll again, backing off as the render overruns."""
    to_lo, to_hi = window
    if to_hi < 0:  # overrun: the pace was wrong (a slower last stretch, a render sitting at 99 %)
        return min(cap, max(floor, SURE_NEAR_SHARE * own))
    if to_lo <= floor:  # inside the window: the end may come at any poll now
        return max(floor, min(PACE_STRIDE * floor, to_hi))
    # Far from it, the end is foretold from the progress so far, and each poll on the way narrows the window.
    far = min(cap, max(floor, PACED_FAR_SHARE * elapsed))
    return min(far, max(floor, to_lo, min(SURE_NEAR_SHARE * own, to_hi)))


def next_interval(job: Job, moved: bool, *, runner=None, trouble: bool = False) -> float:
    """The wait before the next poll. ``trouble``: the device did not answer as it should (locked, unreachable,
    an error): back off on the number of such polls in a row, as before."""
    base, cap = settings.JOBS_POLL_INTERVAL_S, settings.JOBS_POLL_MAX_S
    data = stored_remote_data(job)  # never write back a stale copy (the ETA keeps its anchor here)
    stalls = 0 if moved else int(data.get("stalls", 0)) + 1
    noted = {**data, "stalls": stalls}
    if runner is not None and not trouble:  # the device answered: this poll read its progress
        noted = _note_pace(job, runner, noted, _now())
    if noted != data:
        data = noted
        Job.objects.filter(pk=job.pk).update(remote_data=data)
    job.remote_data = data
    if trouble or runner is None:
        return min(cap, base * (1.5**stalls))
    return interval_for(job, runner, stalls=stalls)
