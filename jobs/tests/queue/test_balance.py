"""The pool's second pass (``jobs.queue.balance``): moves and swaps between lanes that bring the night's end forward,
never a pinned job, never for less than the gain asked, loads counted."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from jobs.queue.balance import Slot, even_out


@dataclass(frozen=True)
class J:
    pk: int
    seconds: float
    model_id: str = "video"


def stepper(load: float = 0.0):
    def step(lane, job, free, loaded):
        return free + job.seconds + (0.0 if job.model_id in loaded else load), frozenset((job.model_id,))

    return step


def lanes_of(slots):
    return {lane: [s.job.pk for s in jobs] for lane, jobs in slots.items()}


def ends(slots, origin, step):
    out = {}
    for lane, jobs in slots.items():
        free, loaded = origin[lane]
        for s in jobs:
            free, loaded = step(lane, s.job, free, loaded)
        out[lane] = free
    return out


ANY = frozenset({1, 2})
EMPTY = {1: (0.0, frozenset({"video"})), 2: (0.0, frozenset({"video"}))}


def test_the_long_job_left_last_on_one_lane_is_swapped_for_a_short_one():
    # The greedy pass's night: 5, 5, 10 on lane 1 (ends at 20), 5, 5 on lane 2 (ends at 10).
    jobs = {pk: J(pk, s) for pk, s in [(1, 5), (2, 5), (3, 5), (4, 5), (5, 10)]}
    slots = {1: [Slot(0, jobs[1], ANY), Slot(2, jobs[3], ANY), Slot(4, jobs[5], ANY)],
             2: [Slot(1, jobs[2], ANY), Slot(3, jobs[4], ANY)]}  # fmt: skip
    assert even_out(slots, EMPTY, stepper(), gain_s=0.5) == 1
    assert ends(slots, EMPTY, stepper()) == {1: 15.0, 2: 15.0}
    for jobs_in_lane in slots.values():  # each lane stays in the household's order
        assert [s.rank for s in jobs_in_lane] == sorted(s.rank for s in jobs_in_lane)


def test_a_job_moves_to_a_lane_that_ends_sooner_with_it():
    slots = {1: [Slot(0, J(1, 6), ANY), Slot(1, J(2, 6), ANY), Slot(2, J(3, 6), ANY)], 2: []}
    assert even_out(slots, EMPTY, stepper(), gain_s=0.5) >= 1
    assert sorted(ends(slots, EMPTY, stepper()).values()) == [6.0, 12.0]


def test_a_pinned_job_never_moves_however_lopsided_the_night():
    slots = {1: [Slot(0, J(1, 6), frozenset({1})), Slot(1, J(2, 6), frozenset({1}))], 2: []}
    assert even_out(slots, EMPTY, stepper(), gain_s=0.5) == 0
    assert lanes_of(slots) == {1: [1, 2], 2: []}


def test_a_job_stays_in_its_lane_when_the_other_device_is_not_in_its_pool():
    slots = {1: [Slot(0, J(1, 6), frozenset({1, 3})), Slot(1, J(2, 6), frozenset({1, 3}))], 2: []}
    assert even_out(slots, EMPTY, stepper(), gain_s=0.5) == 0


@pytest.mark.parametrize(("load", "moves"), [(5.0, False), (1.0, True)])
def test_a_move_pays_the_model_load_it_causes(load, moves):
    # Lane 1 holds "m" with 4 + 4 + 4 = 12; lane 2 holds "x" and ends at 6. An "m" job there costs a load first.
    origin = {1: (0.0, frozenset({"m"})), 2: (0.0, frozenset({"x"}))}
    slots = {1: [Slot(i, J(i, 4, "m"), ANY) for i in range(3)], 2: [Slot(-1, J(3, 6, "x"), frozenset({2}))]}
    made = even_out(slots, origin, stepper(load), gain_s=0.5)
    assert bool(made) is moves
    assert max(ends(slots, origin, stepper(load)).values()) == (6 + load + 4 if moves else 12)


def test_a_change_that_wins_less_than_the_gain_asked_is_not_made():
    # Lane 1 ends at 3 + 3 + 1 = 7, lane 2 at 5.6: the 1 s job there ends the night at 6.6, 0.4 s sooner.
    def night():
        return {
            1: [Slot(0, J(1, 3), ANY), Slot(1, J(2, 3), ANY), Slot(3, J(4, 1), ANY)],
            2: [Slot(2, J(3, 5.6), ANY)],
        }

    slots = night()
    assert even_out(slots, EMPTY, stepper(), gain_s=0.5) == 0
    slots = night()
    assert even_out(slots, EMPTY, stepper(), gain_s=0.3) == 1
    assert lanes_of(slots) == {1: [1, 2], 2: [3, 4]}


def test_a_lane_that_frees_later_counts_from_when_it_frees():
    origin = {1: (0.0, frozenset({"video"})), 2: (10.0, frozenset({"video"}))}  # lane 2 renders 10 s more
    slots = {1: [Slot(0, J(1, 4), ANY), Slot(1, J(2, 4), ANY), Slot(2, J(3, 4), ANY)], 2: []}
    assert even_out(slots, origin, stepper(), gain_s=0.5) == 0  # lane 2 would end at 14, after lane 1's 12


def test_two_lanes_that_end_together_both_hand_work_to_a_third_that_ends_early():
    # Lanes 1 and 2 end together at 6, lane 3 is empty. No single change ends the night sooner (the other lane
    # still ends at 6), but moving work off one of them is the first step: the night then ends at 4.
    every = frozenset({1, 2, 3})
    slots = {
        1: [Slot(0, J(1, 2), every), Slot(2, J(3, 2), every), Slot(4, J(5, 2), every)],
        2: [Slot(1, J(2, 2), every), Slot(3, J(4, 2), every), Slot(5, J(6, 2), every)],
        3: [],
    }
    origin = {**EMPTY, 3: (0.0, frozenset({"video"}))}
    assert even_out(slots, origin, stepper(), gain_s=0.5) == 2
    assert ends(slots, origin, stepper()) == {1: 4.0, 2: 4.0, 3: 4.0}
    for jobs_in_lane in slots.values():
        assert [s.rank for s in jobs_in_lane] == sorted(s.rank for s in jobs_in_lane)


def test_a_change_never_makes_another_lane_end_the_night_later():
    # Lane 1 ends at 6 (3 + 3), lane 2 at 5.9: the 3 s job moved there would end the night at 8.9.
    slots = {1: [Slot(0, J(1, 3), ANY), Slot(1, J(2, 3), ANY)], 2: [Slot(2, J(3, 5.9), frozenset({2}))]}
    assert even_out(slots, EMPTY, stepper(), gain_s=0.05) == 0
