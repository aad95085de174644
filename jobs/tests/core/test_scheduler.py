"""The scheduler's policy as pure functions, with a controllable clock (no database)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from jobs.core.scheduler import DeviceSnapshot, next_job, order_with_reasons

T0 = dt.datetime(2026, 11, 5, 14, 0, tzinfo=dt.UTC)  # a Thursday afternoon (day)


@dataclass
class J:
    pk: int
    owner_id: int = 1
    model_id: str = "m/a"
    priority: int = 0
    when: str = "asap"
    not_before: dt.datetime | None = None
    retry_after: dt.datetime | None = None
    polite: bool = True
    bypassed: int = 0
    created: dt.datetime = T0

    def __post_init__(self):
        self.created = T0 + dt.timedelta(seconds=self.pk)


def snap(now=T0, **kw) -> DeviceSnapshot:
    return DeviceSnapshot(device_id=1, now=now, **kw)


def test_it_starts_nothing_when_paused_locked_or_unreachable():
    jobs = [J(1)]
    for s in (snap(paused=True), snap(state="locked"), snap(state="unreachable"), snap(state="auth_failed")):
        assert next_job(s, jobs)[0] is None
    assert next_job(snap(state="unknown"), jobs)[0].pk == 1


def test_it_runs_fifo_by_default():
    assert next_job(snap(), [J(3), J(1), J(2)])[0].pk == 1


def test_it_puts_admin_priority_first():
    assert next_job(snap(), [J(1), J(2, priority=5)])[0].pk == 2


def test_it_shares_fairly_by_device_time():
    heavy, light = 1, 2
    jobs = [J(1, owner_id=heavy), J(2, owner_id=light)]
    assert next_job(snap(usage={heavy: 3600.0, light: 60.0}), jobs)[0].pk == 2


def test_it_respects_the_night_window_in_the_devices_time_zone():
    job = J(1, when="tonight")
    # 14:00 UTC = 15:00 in Berlin: day. 22:30 UTC = 23:30 in Berlin: night.
    assert next_job(snap(time_zone="Europe/Berlin"), [job])[0] is None
    night = T0.replace(hour=22, minute=30)
    assert next_job(snap(now=night, time_zone="Europe/Berlin"), [job])[0].pk == 1
    early = T0.replace(hour=5, minute=0)  # 06:00 Berlin, before the 07:00 end
    assert next_job(snap(now=early, time_zone="Europe/Berlin"), [job])[0].pk == 1


def test_it_waits_for_not_before_and_backoff():
    later = T0 + dt.timedelta(hours=1)
    assert next_job(snap(), [J(1, when="not_before", not_before=later)])[0] is None
    assert next_job(snap(now=later), [J(1, when="not_before", not_before=later)])[0].pk == 1
    assert next_job(snap(), [J(1, retry_after=later), J(2)])[0].pk == 2


def test_it_prefers_a_loaded_model_but_never_jumps_more_than_k():
    jobs = [J(1), J(2), J(3), J(4, model_id="m/loaded"), J(5, model_id="m/loaded")]
    job, jumped = next_job(snap(loaded=frozenset({"m/loaded"})), jobs)
    assert job.pk == 4 and [j.pk for j in jumped] == [1, 2, 3]
    jobs = [J(1), J(2), J(3), J(4), J(5, model_id="m/loaded")]  # 4 places away: no jump
    assert next_job(snap(loaded=frozenset({"m/loaded"})), jobs)[0].pk == 1


def test_it_never_jumps_a_job_that_was_jumped_k_times():
    jobs = [J(1, bypassed=3), J(2, model_id="m/loaded")]
    assert next_job(snap(loaded=frozenset({"m/loaded"})), jobs)[0].pk == 1


def test_it_keeps_polite_jobs_off_someone_elses_model_by_day():
    s = snap(
        loaded=frozenset({"chat"}),
        foreign_loaded=frozenset({"chat"}),
        npu_free=40,
        npu_cost={"m/a": 45, "m/small": 5},
    )
    job, _ = next_job(s, [J(1), J(2, model_id="m/small")])
    assert job.pk == 2  # fits without evicting the chat
    assert next_job(s, [J(1, polite=False)])[0].pk == 1  # the owner said so
    night = snap(
        now=T0.replace(hour=23, minute=30),
        loaded=frozenset({"chat"}),
        foreign_loaded=frozenset({"chat"}),
        npu_free=40,
        npu_cost={"m/a": 45},
    )
    assert next_job(night, [J(1)])[0].pk == 1


def test_it_keeps_renders_off_the_summary_model_in_the_vaults_window_unless_the_device_allows():
    def summaries(now, **kw):
        vault = {"summary_start": dt.time(23), "summary_end": dt.time(5), "summary_model": "chat"}
        base = {"loaded": frozenset({"chat"}), "npu_free": 40, "npu_cost": {"m/a": 45, "m/small": 5}}
        return snap(now=now, **(vault | base | kw))

    night = T0.replace(hour=23, minute=30)
    big = J(1, polite=False)  # the owner's "polite" does not decide this: the device's setting does
    assert next_job(summaries(night), [big])[0] is None
    assert next_job(summaries(night), [big, J(2, model_id="m/small")])[0].pk == 2  # fits alongside
    assert next_job(summaries(night), [J(3, model_id="chat")])[0].pk == 3  # uses the loaded model
    assert next_job(summaries(night, may_evict_summary=True), [big])[0].pk == 1
    assert next_job(summaries(T0.replace(hour=5, minute=30)), [big])[0].pk == 1  # summaries done
    assert next_job(summaries(T0), [big])[0].pk == 1  # by day: not the summaries' window
    assert next_job(summaries(night, summary_model=None), [big])[0].pk == 1  # summaries off
    assert next_job(summaries(night, loaded=frozenset()), [big])[0].pk == 1  # summary model not loaded


def test_it_orders_the_whole_queue_with_affinity_and_windows():
    jobs = [J(1, model_id="x"), J(2, model_id="y"), J(3, model_id="x"), J(4, when="tonight")]
    order = [j.pk for j, _why in order_with_reasons(snap(), jobs)]
    assert order == [1, 3, 2, 4]


def test_the_plan_says_why_each_job_waits_or_jumps():
    jobs = [J(1, model_id="m/music"), J(2, model_id="m/video", owner_id=2), J(3, when="tonight")]
    rows = order_with_reasons(snap(loaded=frozenset({"m/video"})), jobs)
    assert [(j.pk, why) for j, why in rows] == [
        (2, "runs first: its model is already loaded"),
        (1, ""),
        (3, "waits for the night window"),
    ]
    fair = order_with_reasons(snap(usage={1: 3600.0, 2: 0.0}), [J(1), J(2, owner_id=2)])
    assert fair[0][0].pk == 2 and fair[0][1].startswith("fair share:")
    assert order_with_reasons(snap(paused=True), [J(1)])[0][1] == "paused by an admin"
    assert order_with_reasons(snap(), [J(1, priority=2)])[0][1] == "moved up by an admin"


def test_the_fair_share_reasons_are_those_of_the_full_scan_on_a_long_mixed_queue():
    """The reasons skip the scan for a job nobody later in the queue out-uses (it was quadratic in the queue):
    every reason is still the one comparing each job with every later one gives."""
    import random

    from jobs.core import scheduler

    rng = random.Random(5)
    usage = {owner: float(rng.choice([0, 60, 600, 3600])) for owner in range(1, 7)}
    jobs = [J(i, owner_id=rng.randint(1, 6), priority=rng.choice([0, 0, 0, 1])) for i in range(1, 160)]
    s = snap(usage=usage)
    rows = scheduler.order_with_reasons(s, jobs)
    plain = [(job, "") for job, _why in rows]
    full = [scheduler._ready_reason(job, i, plain, s) for i, (job, _why) in enumerate(plain)]  # no shortcut
    assert [why for _job, why in rows] == full
    assert sum(why.startswith("fair share:") for why in full) > 10  # the case is exercised


def test_a_device_holds_models_while_its_npu_has_room_and_lets_the_least_recently_used_go_first():
    from jobs.core.scheduler import held_after

    s = snap(npu_total=100, npu_cost={"video": 60, "image": 20, "tts": 10, "mesh": 40})
    held = held_after(s, held_after(s, (), "video"), "image")
    assert held == ("video", "image")  # 60 + 20 + the margin of 5: room for both
    assert held_after(s, held, "video") == ("image", "video")  # used again: the last to go now
    assert held_after(s, ("image", "video"), "tts") == ("image", "video", "tts")  # 95 of 100: still room
    assert held_after(s, ("image", "video", "tts"), "mesh") == ("tts", "mesh")  # image, then video, make room
    assert held_after(s, ("video",), "unlisted") == ("unlisted",)  # units unknown: it may need the whole NPU
    assert held_after(snap(npu_cost={"image": 20, "tts": 10}), ("image",), "tts") == (
        "tts",
    )  # NPU size unknown


def test_the_planned_order_counts_a_model_the_device_still_holds_as_loaded():
    # a, then b (neither may be jumped): the device holds both (room for three models), so a's second job is a
    # loaded-model job and goes ahead of c's, as the device's own pick will do.
    s = snap(npu_total=100, npu_cost={"m/a": 30, "m/b": 30, "m/c": 30})
    jobs = [J(1, model_id="m/a", bypassed=3), J(2, model_id="m/b", bypassed=3), J(3, model_id="m/c"), J(4)]
    order = [job.pk for job, _why in order_with_reasons(s, jobs)]
    assert order == [1, 2, 4, 3]
    tight = snap(npu_total=60, npu_cost={"m/a": 30, "m/b": 30, "m/c": 30})  # one model at a time
    assert [job.pk for job, _why in order_with_reasons(tight, jobs)] == [1, 2, 3, 4]


@dataclass
class P(J):
    """A job for any device of the pool, with its estimate."""

    pinned: bool = False
    estimate_s: float = 60.0


def test_in_the_pool_the_longest_job_whose_model_is_held_goes_first():
    s = snap(loaded=frozenset({"m/a"}))
    jobs = [P(1, estimate_s=10), P(2, estimate_s=600), P(3, estimate_s=5), P(4, estimate_s=600)]
    job, jumped = next_job(s, jobs)
    assert job.pk == 2 and [j.pk for j in jumped] == [1]  # the first of the longest
    order = order_with_reasons(s, jobs)
    assert [j.pk for j, _why in order] == [2, 4, 1, 3]
    assert order[0][1] == "runs first: a long render early, so that short ones end the night"


def test_a_pinned_job_never_jumps_for_its_length_nor_is_a_job_jumped_more_than_k_times():
    s = snap(loaded=frozenset({"m/a"}))
    assert next_job(s, [J(1), J(2)])[0].pk == 1  # pinned: base order
    assert next_job(s, [P(1, estimate_s=10), J(2)])[0].pk == 1  # a pinned job does not jump for its length
    assert next_job(s, [P(1, estimate_s=10, bypassed=3), P(2, estimate_s=600)])[0].pk == 1


def test_a_held_model_still_comes_before_length():
    s = snap(loaded=frozenset({"m/a"}))
    jobs = [P(1, model_id="m/b", estimate_s=900), P(2, estimate_s=10), P(3, estimate_s=50)]
    job, jumped = next_job(s, jobs)
    assert job.pk == 3 and [j.pk for j in jumped] == [1, 2]
