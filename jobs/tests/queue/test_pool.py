"""The pool (``jobs.queue.pool``): a job for "any device" waits in the lane of the device where it finishes first,
moves when a device frees, goes away or comes back, and is claimed only where it waits.

Two Tiinys with the same capabilities: ``device`` ("Pocket") holds the video model, ``shelf`` holds nothing. The
Celery work the pool queues is recorded (``sent``), never sent to a broker.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.utils import timezone

from devices import errors, loads
from devices.loads import device_note_load_seconds
from devices.models import Device
from devices.services import device_set_state
from jobs.core import lease
from jobs.core.scheduler import fair_usage
from jobs.core.transitions import job_transition
from jobs.doors import intake
from jobs.kinds.runners import PollResult
from jobs.kinds.table import shape_of
from jobs.models import Job, JobState, LostRender, RenderStat
from jobs.queue import dispatch, engine, enqueue, pool, reconcile, services
from jobs.queue.eta import LOAD_SECONDS
from jobs.tests.ui_fixtures import TTS, VIDEO, another_tiiny, capabilities, make_job

pytestmark = pytest.mark.django_db

SHORT = {"prompt": "a fox", "size": "832x480", "seconds": 2, "steps": 4}
SEEN = {"away_seen_at": timezone.now().timestamp() + 86400}  # its poll found the device away, just now


@pytest.fixture
def sent(monkeypatch):
    out: list[tuple[str, tuple, dict]] = []
    monkeypatch.setattr(enqueue, "send", lambda task, *args, **options: out.append((task, args, options)))
    return out


@pytest.fixture
def shelf(db):
    return another_tiiny("Shelf", npu_units_total=100, npu_units_used=0)


def pool_job(owner, device, others, **fields) -> Job:
    """A waiting video job for any of ``device`` and ``others``, waiting in ``device``'s lane."""
    return make_job(owner, device, pinned=False, pool=sorted({device.pk, *(d.pk for d in others)}), **fields)


def running(owner, device, *, left: float) -> Job:
    """A render on ``device`` with about ``left`` seconds to go (its estimate, nothing learned of its rate)."""
    return make_job(owner, device, state="running", estimate_s=left, progress=0.0)


def lane_of(job: Job) -> int:
    job.refresh_from_db()
    return job.device_id


def test_a_free_device_takes_a_pool_job_from_a_busy_lane(device, shelf, member, sent):
    running(member, device, left=300)
    job = pool_job(member, device, [shelf])
    assert pool.rebalance() == {device.pk, shelf.pk}
    assert lane_of(job) == shelf.pk


def test_a_device_holding_the_model_keeps_a_job_it_finishes_sooner_than_a_load(device, shelf, member, sent):
    # Pocket is busy for 10 s more and holds the model: 10 s < the shelf's model load, so one load is saved.
    running(member, device, left=LOAD_SECONDS / 3)
    job = pool_job(member, device, [shelf])
    assert pool.rebalance() == set()
    assert lane_of(job) == device.pk


def test_pool_jobs_spread_over_the_devices_and_pinned_ones_stay(device, shelf, member, other_member, sent):
    pinned = make_job(other_member, shelf)  # the shelf's own job, queued first
    a = pool_job(member, device, [shelf])
    b = pool_job(member, device, [shelf])
    c = pool_job(member, device, [shelf])
    pool.rebalance()
    assert lane_of(pinned) == shelf.pk
    # a: Pocket (model held, free). b: the shelf after its pinned job ends, or Pocket after a: Pocket is sooner.
    # c: after that, the shelf (one render behind) beats Pocket (two renders behind).
    assert [lane_of(a), lane_of(b), lane_of(c)] == [device.pk, device.pk, shelf.pk]


def test_an_away_or_paused_device_hands_its_pool_jobs_on_and_keeps_its_pinned_ones(
    device, shelf, member, sent
):
    pinned = make_job(member, shelf)
    waiting = pool_job(member, shelf, [device])
    running(member, device, left=3600)  # Pocket is busy for an hour: the shelf would be first, were it here
    Device.objects.filter(pk=shelf.pk).update(state=Device.State.UNREACHABLE)
    pool.rebalance()
    assert lane_of(waiting) == device.pk and lane_of(pinned) == shelf.pk

    Device.objects.filter(pk=shelf.pk).update(state=Device.State.ONLINE, queue_paused=True)
    back = pool_job(member, shelf, [device])
    pool.rebalance()
    assert lane_of(back) == device.pk


def test_a_device_back_online_takes_pool_jobs_again_at_once(
    device, shelf, member, sent, django_capture_on_commit_callbacks
):
    running(member, device, left=3600)
    Device.objects.filter(pk=shelf.pk).update(state=Device.State.UNREACHABLE)
    job = pool_job(member, device, [shelf])
    assert pool.rebalance() == set()  # nowhere better to go
    with django_capture_on_commit_callbacks(execute=True):
        assert device_set_state(device_id=shelf.pk, state=Device.State.ONLINE)
    assert lane_of(job) == shelf.pk
    assert ("dispatch", (shelf.pk,), {}) in sent  # the idle device is woken for it


def test_a_job_no_device_of_its_pool_can_start_stays_where_it_is(device, shelf, member, sent):
    Device.objects.filter(pk__in=[device.pk, shelf.pk]).update(state=Device.State.UNREACHABLE)
    job = pool_job(member, shelf, [device])
    assert pool.rebalance() == set()
    assert lane_of(job) == shelf.pk


def test_a_pinned_job_never_moves(device, shelf, member, sent):
    running(member, device, left=3600)
    job = make_job(member, device)
    assert pool.rebalance() == set()
    assert lane_of(job) == device.pk


def test_a_device_that_frees_claims_a_pool_job_from_a_busy_lane(device, shelf, member, sent):
    running(member, device, left=3600)
    job = pool_job(member, device, [shelf])
    Job.objects.filter(pk=job.pk).update(device=device)  # as if placed before Pocket's render began
    assert dispatch.dispatch_device(shelf.pk) == job.pk
    job.refresh_from_db()
    assert (job.state, job.device_id) == (JobState.PREPARING, shelf.pk)
    assert [task for task, _a, _o in sent].count("run_job") == 1


def test_a_device_that_frees_starts_its_lanes_next_job_before_the_pool_is_planned_again(
    device, shelf, member, sent, monkeypatch
):
    # The pool's plan runs once the run is sent, with the job already the device's: not between a render's end
    # and the next start.
    running(member, device, left=3600)
    first = pool_job(member, shelf, [device])
    pool_job(member, shelf, [device])
    seen: list[tuple[str, bool]] = []
    plan_again = pool.rebalance_and_wake

    def noted(*args, **kwargs):
        seen.append((Job.objects.get(pk=first.pk).state, any(task == "run_job" for task, _a, _o in sent)))
        return plan_again(*args, **kwargs)

    monkeypatch.setattr(pool, "rebalance_and_wake", noted)
    assert dispatch.dispatch_device(shelf.pk) == first.pk
    assert seen == [(JobState.PREPARING, True)]


def test_a_claim_holds_only_while_the_job_waits_in_that_lane(device, shelf, member):
    job = pool_job(member, device, [shelf])
    moved = dict(from_states=[JobState.QUEUED], to=JobState.PREPARING, message="Started.")
    assert not job_transition(job.pk, on_device=shelf.pk, **moved)
    assert job_transition(job.pk, on_device=device.pk, **moved)


def test_fair_share_counts_device_time_on_every_device(device, shelf, member, other_member, sent):
    now = timezone.now()
    make_job(member, shelf, state="done", device_seconds=3600.0, finished_at=now - dt.timedelta(hours=1))
    assert fair_usage(now) == {member.pk: 3600.0}
    mine = make_job(member, device)
    theirs = make_job(other_member, device)
    assert dispatch.dispatch_device(device.pk) == theirs.pk  # member used the shelf an hour: other goes first
    assert Job.objects.get(pk=mine.pk).state == JobState.QUEUED


# -- submit: the pool of a request --------------------------------------------------------------------------------


def test_a_submitted_pool_job_waits_where_it_is_ready_first(device, shelf, member, sent):
    running(member, device, left=3600)
    job = services.job_submit(
        owner=member, device=device, pool=[shelf], kind="video", model_id=VIDEO, params=SHORT
    )
    assert (job.pinned, job.device_id, sorted(job.pool)) == (False, shelf.pk, sorted([device.pk, shelf.pk]))
    assert "whichever of Pocket, Shelf" in job.events.get(seq=1).message


def test_a_pool_is_those_devices_that_admit_the_request(device, member, sent):
    no_speech = capabilities()
    no_speech["models"] = [m for m in no_speech["models"] if m["id"] != TTS]
    small = another_tiiny("Small", caps=no_speech)
    job = services.job_submit(
        owner=member,
        device=small,
        pool=[device],
        kind="video",
        model_id=VIDEO,
        params=SHORT,
    )
    assert sorted(job.pool) == sorted([device.pk, small.pk])
    speech = {"model": TTS, "input": "good night", "voice": "serena", "response_format": "wav"}
    chosen, checked = intake.check_request_any(owner=member, kind="speech", data=speech)
    assert (chosen, checked.pool) == (device, [device.pk])  # the small one has no speech model


def test_the_same_reason_everywhere_is_said_once(device, shelf, member):
    with pytest.raises(intake.RequestInvalid) as exc:
        intake.check_request_any(owner=member, kind="video", data={**SHORT, "model": VIDEO, "prompt": ""})
    assert "No device can" not in exc.value.first()[1]


def test_a_request_no_device_can_do_is_refused_naming_each(device, member, sent):
    narrow = capabilities()
    narrow["video"][VIDEO]["canvases"] = ["832x480"]
    shelf = another_tiiny("Shelf", caps=narrow)
    with pytest.raises(intake.RequestInvalid) as exc:
        intake.check_request_any(
            owner=member, kind="video", data={**SHORT, "model": VIDEO, "size": "4000x4000"}
        )
    message = exc.value.first()[1]
    assert "No device can do exactly this" in message and "Pocket:" in message and "Shelf:" in message
    with pytest.raises(ValidationError):
        services.job_submit(
            owner=member,
            device=device,
            pool=[shelf],
            kind="video",
            model_id=VIDEO,
            params={**SHORT, "seconds": 99},
        )
    assert not Job.objects.exists()


# -- a render lost with its device --------------------------------------------------------------------------------


def test_a_pool_render_on_a_device_away_too_long_goes_back_to_the_pool(device, shelf, member, sent, settings):
    settings.JOBS_DEVICE_LOST_S = 600
    lost = pool_render(member, device, shelf)
    attic = another_tiiny("Attic")
    pinned = make_job(member, attic, state="running", remote_id="v-2")
    away = timezone.now() - dt.timedelta(seconds=601)
    Device.objects.filter(pk__in=[device.pk, attic.pk]).update(
        state=Device.State.UNREACHABLE, state_changed_at=away
    )
    assert reconcile.give_up_lost_renders(reconcile._active_jobs(), timezone.now()) == 1
    lost.refresh_from_db()
    assert (lost.state, lost.requeues, lost.remote_id) == (JobState.QUEUED, 1, "")
    assert "has been away for 10 min" in lost.events.get(state=JobState.INTERRUPTED).message
    assert Job.objects.get(pk=pinned.pk).state == JobState.RUNNING  # pinned: it waits for its device

    pool.rebalance()
    assert lane_of(lost) == shelf.pk  # the device still away gives it up; the other one takes it


def test_a_render_is_given_up_only_once_a_request_of_its_own_found_the_device_away_that_long(
    device, shelf, member, sent, settings
):
    # The device's state is only as fresh as the last request to it: after a worker died (no request meanwhile),
    # the device may be back with the render alive. Its poll chain notes when it last found the device away.
    settings.JOBS_DEVICE_LOST_S = 60
    went_away = timezone.now() - dt.timedelta(minutes=5)
    job = make_job(member, device, state="running", pinned=False, pool=[device.pk, shelf.pk], remote_id="v-1")
    Device.objects.filter(pk=device.pk).update(state=Device.State.LOCKED, state_changed_at=went_away)

    early = went_away + dt.timedelta(seconds=30)
    for seen in (None, early):  # never, or before JOBS_DEVICE_LOST_S had passed: it asks the device now
        Job.objects.filter(pk=job.pk).update(remote_data={"away_seen_at": seen.timestamp()} if seen else {})
        sent.clear()
        assert reconcile.give_up_lost_renders(reconcile._active_jobs(), timezone.now()) == 0
        assert Job.objects.get(pk=job.pk).state == JobState.RUNNING
        assert [task for task, _args, _options in sent] == ["poll_job"]

    Job.objects.filter(pk=job.pk).update(
        remote_data={"away_seen_at": (went_away + dt.timedelta(seconds=61)).timestamp()}
    )
    assert reconcile.give_up_lost_renders(reconcile._active_jobs(), timezone.now()) == 1


def test_a_poll_that_finds_the_device_away_notes_when_and_one_that_finds_it_back_forgets(
    device, shelf, member, sent, monkeypatch
):
    job = make_job(member, device, state="running", pinned=False, pool=[device.pk, shelf.pk], remote_id="v-1")
    lease.lease_acquire(device.pk, job.pk)
    answers = [
        errors.DeviceLocked("locked"),
        errors.DeviceLocked("locked"),
        PollResult(status="running", progress=5.0),
    ]

    class Runner:
        def poll(self):
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

    monkeypatch.setattr(engine, "runner_for", lambda job: Runner())
    seen = []
    for _ in range(2):
        engine.poll(job.pk, Job.objects.get(pk=job.pk).poll_ticket)
        seen.append(Job.objects.get(pk=job.pk).remote_data.get("away_seen_at"))
    assert None not in seen and seen[0] <= seen[1] <= timezone.now().timestamp()  # each failed poll, noted
    engine.poll(job.pk, Job.objects.get(pk=job.pk).poll_ticket)
    assert "away_seen_at" not in Job.objects.get(pk=job.pk).remote_data  # the device answers again


def test_a_pool_render_on_a_device_away_briefly_keeps_its_claim(device, shelf, member, sent, settings):
    settings.JOBS_DEVICE_LOST_S = 600
    job = make_job(member, device, state="running", pinned=False, pool=[device.pk, shelf.pk], remote_id="v-1")
    Device.objects.filter(pk=device.pk).update(
        state=Device.State.UNREACHABLE, state_changed_at=timezone.now() - dt.timedelta(seconds=599)
    )
    assert reconcile.give_up_lost_renders(reconcile._active_jobs(), timezone.now()) == 0
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING


class FakeRunner:
    """The device's side of a stop, as the runner would meet it (the unit tests' outermost seam)."""

    def __init__(self, outcome: Exception | None = None) -> None:
        self.outcome, self.stopped = outcome, []

    def __call__(self, job):  # runner_for(job)
        self.job = job
        return self

    def cancel(self) -> None:
        if self.outcome is not None:
            raise self.outcome
        self.stopped.append((self.job.device_id, self.job.remote_id))


def pool_render(owner, device, other) -> Job:
    """A pool job rendering on ``device`` (the render ``v-1``, its poll having found the device away)."""
    return make_job(
        owner,
        device,
        state="running",
        pinned=False,
        pool=[device.pk, other.pk],
        remote_id="v-1",
        remote_data=SEEN,
    )


def _given_up(member, device, shelf, settings) -> Job:
    settings.JOBS_DEVICE_LOST_S = 60
    job = pool_render(member, device, shelf)
    Device.objects.filter(pk=device.pk).update(
        state=Device.State.UNREACHABLE, state_changed_at=timezone.now() - dt.timedelta(minutes=5)
    )
    assert reconcile.give_up_lost_renders(reconcile._active_jobs(), timezone.now()) == 1
    return job


def test_a_device_back_with_a_given_up_render_stops_it_before_anything_else(
    device, shelf, member, sent, settings, monkeypatch
):
    job = _given_up(member, device, shelf, settings)
    assert LostRender.objects.filter(device=device, job=job, remote_id="v-1").exists()
    Job.objects.filter(pk=job.pk).update(
        device=shelf, state=JobState.RUNNING, remote_id="v-9"
    )  # runs there now
    Device.objects.filter(pk=device.pk).update(state=Device.State.ONLINE)
    waiting = make_job(member, device)
    assert dispatch.dispatch_device(device.pk) is None  # not before the old render is stopped
    assert ("stop_lost_renders", (device.pk,), {}) in sent
    assert Job.objects.get(pk=waiting.pk).state == JobState.QUEUED

    runner = FakeRunner()
    monkeypatch.setattr(engine, "runner_for", runner)
    assert engine.stop_lost_renders(device.pk) == 1
    assert runner.stopped == [(device.pk, "v-1")]  # the old render on the old device, not the new one
    assert not LostRender.objects.exists()
    assert "earlier render on Pocket was stopped" in job.events.order_by("-seq").first().message
    assert Job.objects.get(pk=job.pk).remote_id == "v-9"  # the render on the shelf goes on
    assert dispatch.dispatch_device(device.pk) == waiting.pk


@pytest.mark.parametrize(
    ("outcome", "kept"),
    [(errors.DeviceUnreachable("away again"), True), (errors.NotFound("gone"), False)],
)
def test_a_stop_that_finds_the_device_away_again_is_kept_for_its_return(
    device, shelf, member, sent, settings, monkeypatch, outcome, kept
):
    _given_up(member, device, shelf, settings)
    monkeypatch.setattr(engine, "runner_for", FakeRunner(outcome))
    engine.stop_lost_renders(device.pk)
    assert LostRender.objects.exists() is kept
    Device.objects.filter(pk=device.pk).update(state=Device.State.ONLINE)
    sent.clear()
    reconcile.stop_lost_renders_on_return(timezone.now())
    assert (("stop_lost_renders", (device.pk,), {}) in sent) is kept


def test_a_moved_job_takes_its_new_devices_estimate(device, shelf, member, sent):
    running(member, device, left=3600)
    job = pool_job(member, device, [shelf])
    shape = shape_of("tiiny", "video", VIDEO, job.params)
    RenderStat.objects.create(
        device=shelf, kind="video", model_id=VIDEO, shape=shape, mean_s=123.0, samples=4
    )
    pool.rebalance()
    job.refresh_from_db()
    assert (job.device_id, job.estimate_s) == (shelf.pk, 123.0)


def test_a_render_is_not_given_up_while_no_other_device_of_its_pool_could_take_it(
    device, shelf, member, sent, settings
):
    settings.JOBS_DEVICE_LOST_S = 60
    job = pool_render(member, device, shelf)
    long_ago = timezone.now() - dt.timedelta(minutes=5)
    Device.objects.filter(pk=device.pk).update(state=Device.State.UNREACHABLE, state_changed_at=long_ago)
    Device.objects.filter(pk=shelf.pk).update(queue_paused=True)
    assert reconcile.give_up_lost_renders(reconcile._active_jobs(), timezone.now()) == 0
    Device.objects.filter(pk=shelf.pk).update(queue_paused=False, state=Device.State.LOCKED)
    assert reconcile.give_up_lost_renders(reconcile._active_jobs(), timezone.now()) == 0
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING


@pytest.fixture
def learned_loads():
    """Load times the hub learns are kept in the cache (Redis): forgotten after the test."""
    keys = []
    yield lambda device, model, seconds: (
        keys.append(loads._load_key(device.pk, model)),
        device_note_load_seconds(device.pk, model, seconds),
    )
    cache.delete_many(keys)


def test_the_load_a_device_is_known_for_decides_whether_it_takes_a_job(device, member, sent, learned_loads):
    listed = capabilities()
    listed["models"] = [{**m, "load_s": 20.0} if m["id"] == VIDEO else m for m in listed["models"]]
    shelf = another_tiiny("Shelf", caps=listed)  # it lists 20 s to load the video model
    running(member, device, left=10)  # Pocket holds the model, 10 s from free: sooner than the shelf's load
    job = pool_job(member, device, [shelf])
    pool.rebalance()
    assert lane_of(job) == device.pk
    learned_loads(shelf, VIDEO, 4.0)  # the hub saw the shelf load it in 4 s: it finishes first
    pool.rebalance()
    assert lane_of(job) == shelf.pk


def test_the_night_ends_on_both_devices_together_not_with_a_long_job_left_on_one(device, shelf, member, sent):
    """The first pass alone leaves the last long render on one device (5, 5, 10 minutes there, 5, 5 on the
    other); the second pass (``jobs.queue.balance``) evens the lanes out: both end after 15 minutes."""
    short, long = dict(SHORT, seconds=2), dict(SHORT, seconds=7)
    for d in (device, shelf):  # both devices learned both shapes: 5 and 10 minutes
        for params, minutes in ((short, 5), (long, 10)):
            shape = shape_of("tiiny", "video", VIDEO, params)
            RenderStat.objects.create(
                device=d, kind="video", model_id=VIDEO, shape=shape, mean_s=60.0 * minutes, samples=3
            )
    Device.objects.filter(pk__in=[device.pk, shelf.pk]).update(loaded_models=[])  # a load on either: alike
    plan = [("a", short, 5), ("b", short, 5), ("c", short, 5), ("d", short, 5), ("e", long, 10)]
    jobs = {
        name: (pool_job(member, device, [shelf], params=dict(p, prompt=name), estimate_s=60.0 * m), m)
        for name, p, m in plan
    }
    pool.rebalance()
    lanes = {pk: sum(m for job, m in jobs.values() if lane_of(job) == pk) for pk in (device.pk, shelf.pk)}
    assert lanes == {device.pk: 15, shelf.pk: 15}


def test_lanes_that_end_the_night_sooner_than_a_plan_made_afresh_are_kept(
    device, shelf, member, sent, monkeypatch
):
    """A plan made afresh can end the night later than the lanes it would replace (its passes are greedy and
    local): then the jobs stay where they wait. Here a fresh plan that puts every job on the Pocket stands for it."""
    jobs = [
        pool_job(member, d, [device, shelf], prompt=f"fox {i}") for i, d in enumerate([device, shelf] * 2)
    ]
    before = {job.pk: job.device_id for job in jobs}
    monkeypatch.setattr(pool, "best_lane", lambda job, lanes, step: lanes[device.pk])
    monkeypatch.setattr(pool, "even_out", lambda *args, **kwargs: 0)
    assert pool.assign() == {}  # 2 × 7 min on each device, not 4 × 7 on the Pocket
    assert pool.rebalance() == set()
    assert {job.pk: lane_of(job) for job in jobs} == before


def test_a_fresh_plan_that_ends_the_night_sooner_moves_the_jobs(device, shelf, member, sent):
    jobs = [pool_job(member, device, [shelf], prompt=f"fox {i}") for i in range(4)]
    assert pool.rebalance() == {device.pk, shelf.pk}
    assert sorted(lane_of(job) for job in jobs) == sorted([device.pk, device.pk, shelf.pk, shelf.pk])


def test_a_device_free_now_is_never_left_without_the_work_a_fresh_plan_gives_it():
    """Lanes kept as they stand must not leave a free device idle where the fresh plan starts a job on it, even
    when they would end the night sooner (a job 3 s on lane 1, 6 s on lane 2)."""

    def step(lane, job, free_at, loaded):
        return free_at + (3.0 if lane == 1 else 6.0), loaded

    job = object()
    now = dt.datetime.fromtimestamp(50.0, tz=dt.UTC)
    kept = {1: [pool.Slot(0, job, frozenset({1, 2}))], 2: []}
    placed = {1: [], 2: [pool.Slot(0, job, frozenset({1, 2}))]}
    both_free = {1: (0.0, ()), 2: (0.0, ())}  # kept: the night ends at 3 s, but lane 2 idles; fresh: at 6 s
    assert not pool._keeps(kept, placed, both_free, step, 0.05, now)
    lane_2_busy = {1: (0.0, ()), 2: (100.0, ())}  # kept: 100 s; fresh: 106 s, and no free lane left idle
    assert pool._keeps(kept, placed, lane_2_busy, step, 0.05, now)
