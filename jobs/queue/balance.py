"""Evening out the pool's lanes: after the planner's first pass, move or swap waiting pool jobs between lanes while
that brings the end of the last lane forward.

The first pass (``jobs.queue.pool.assign``) is greedy: each job, in the household's order, goes where it would
finish first, seeing only the jobs before it. So the night can end lopsided: the last long job (a 7-minute video)
lands on one device while another finishes its short jobs early and then sits idle. This pass looks at the whole
plan. It takes the lane that ends last and tries, for each of its last ``tail`` pool jobs, a move to another lane
of the job's pool and a swap with one of that lane's last jobs; it applies the change that ends the night
soonest (loads included: a change that costs two model loads more than it saves is not taken), and starts again,
until no change wins at least ``gain_s``. Where two lanes end the night together, no single change ends it sooner:
a change that leaves fewer lanes ending there (work moved off one of them, no lane ending later) is the first
step, and counts as a win. The order within a lane stays the household's (each job keeps its place
among the jobs of its new lane); only which device runs it changes, and a pinned job never moves.

Pure and quick: times are seconds (floats), what a job costs on a lane comes from the caller (``step``), and a
lane is simulated again only from the first place a change touches.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: ``step(lane, job, free_at, loaded) -> (free_at, loaded)``: the lane after it ran ``job`` (its load included);
#: ``loaded`` is the caller's (what the device holds), passed along as it is.
Step = Callable[[int, Any, float, Any], tuple[float, Any]]

TAIL = 8  # the last jobs of a lane that may move: a change near a lane's end shifts few jobs' times
ROUNDS = 12  # changes per plan at most (each one re-simulates only the two lanes it touches)


@dataclass(frozen=True)
class Slot:
    """A waiting job in a lane: its place in the household's order (``rank``), and where it may run (``lanes``)."""

    rank: int
    job: Any
    lanes: frozenset[int]  # its own device's lane only, for a pinned job


def even_out(
    slots: dict[int, list[Slot]],
    origin: dict[int, tuple[float, Any]],
    step: Step,
    *,
    gain_s: float,
    tail: int = TAIL,
    rounds: int = ROUNDS,
) -> int:
    """Move and swap jobs between the lanes of ``slots`` (each in rank order, from its lane's ``origin`` state:
    when it frees, what it holds) while the latest end comes at least ``gain_s`` sooner. Changes ``slots`` in place;
    returns the number of changes made."""
    made = 0
    for _ in range(rounds):
        change = _best_change(slots, origin, step, gain_s, tail)
        if change is None:
            break
        for lane, new in change.items():
            slots[lane] = new
        made += 1
    return made


def _states(lane: int, slots: list[Slot], origin: tuple[float, Any], step: Step) -> list[tuple]:
    """The lane's (free_at, loaded) before each of its jobs, and after the last."""
    free, loaded = origin
    out = [(free, loaded)]
    for slot in slots:
        free, loaded = step(lane, slot.job, free, loaded)
        out.append((free, loaded))
    return out


def ends_of(
    slots: dict[int, list[Slot]], origin: dict[int, tuple[float, Any]], step: Step
) -> dict[int, float]:
    """When each lane of ``slots`` would end, from its ``origin`` state."""
    return {lane: _run(lane, jobs, origin[lane], step) for lane, jobs in slots.items()}


def _run(lane: int, slots: list[Slot], state: tuple[float, Any], step: Step) -> float:
    free, loaded = state
    for slot in slots:
        free, loaded = step(lane, slot.job, free, loaded)
    return free


def _with(slots: list[Slot], out: int | None, into: Slot | None) -> tuple[list[Slot], int]:
    """``slots`` without its ``out``-th job and with ``into`` at its rank; and the first index that changed."""
    new = list(slots)
    first = len(new)
    if out is not None:
        del new[out]
        first = out
    if into is not None:
        at = bisect.bisect([s.rank for s in new], into.rank)
        new.insert(at, into)
        first = min(first, at)
    return new, first


def _best_change(
    slots: dict[int, list[Slot]],
    origin: dict[int, tuple[float, Any]],
    step: Step,
    gain_s: float,
    tail: int,
) -> dict[int, list[Slot]] | None:
    states = {lane: _states(lane, jobs, origin[lane], step) for lane, jobs in slots.items()}
    ends = {lane: s[-1][0] for lane, s in states.items()}
    if len(ends) < 2:
        return None
    worst = max(ends, key=lambda lane: (ends[lane], lane))
    span = ends[worst]

    def score(values: list[float]) -> tuple[int, float, float] | None:
        """How late the night ends: the lanes that end within ``gain_s`` of its present end, then the latest
        end, then all of them. None for a night that would end later."""
        if max(values) > span + 1e-9:
            return None
        return (sum(1 for v in values if v > span - gain_s), max(values), sum(values))

    # A change must leave fewer lanes ending near the present end: none (the night ends at least ``gain_s``
    # sooner), or fewer when two lanes end together there (moving work off one of them is then the first step).
    now_near = sum(1 for v in ends.values() if v > span - gain_s)
    best: tuple[int, float, float] | None = None
    chosen = None
    mine = slots[worst]

    def consider(changed: dict[int, list[Slot]], first: dict[int, int]) -> None:
        nonlocal best, chosen
        new_ends = dict(ends)
        for lane, new in changed.items():
            new_ends[lane] = _run(lane, new[first[lane] :], states[lane][first[lane]], step)
        key = score(list(new_ends.values()))
        if key is not None and key[0] < now_near and (best is None or key < best):
            best, chosen = key, changed

    for i in range(max(0, len(mine) - tail), len(mine)):
        slot = mine[i]
        for other in sorted(slot.lanes - {worst}):
            if other not in slots:
                continue
            theirs = slots[other]
            left, a = _with(mine, i, None)
            joined, b = _with(theirs, None, slot)
            consider({worst: left, other: joined}, {worst: a, other: b})
            for j in range(max(0, len(theirs) - tail), len(theirs)):
                back = theirs[j]
                if worst not in back.lanes:
                    continue
                left, a = _with(mine, i, back)
                joined, b = _with(theirs, j, slot)
                consider({worst: left, other: joined}, {worst: a, other: b})
    return chosen
