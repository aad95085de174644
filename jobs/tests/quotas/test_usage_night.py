"""Usage against a known night on the Tiiny emulator: real Celery workers, Redis and the emulator over HTTP.

Two people queue three jobs that each need a model load. A sampler reads the emulator's own counters (its
``current_work`` says when the device computes: a model load, a render, an inference) while the night runs. The
hub's usage must cover every instant the device worked, attribute it to the person whose job held the device,
and add up to the spans it recorded (one device, one job at a time: no two spans overlap).
"""

from __future__ import annotations

import datetime as dt
import threading
import time

import httpx
import pytest

from jobs.models import DeviceUse
from jobs.queue.services import job_submit
from jobs.quotas import services as quotas
from jobs.tests.conftest import wait_job

pytestmark = pytest.mark.integration

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"
SPEED = 300.0  # a 2 s video (420 device-seconds) takes 1.4 s; a model load 0.1-0.3 s: the sampler sees both
# A 12 s loop: 41 device-seconds, 0.14 s here. A 4 s one (45 ms) fell between two samples of a sampler slowed by a
# loaded machine (the suite on two processes), and its owner's work went unseen.
TOL = dt.timedelta(seconds=0.1)  # one sample apart, plus the round trip of a counters read


class Sampler(threading.Thread):
    """Wall-clock instants at which the emulator said it was working, and those at which a load had started."""

    def __init__(self, base_url: str) -> None:
        super().__init__(daemon=True)
        self.http = httpx.Client(base_url=base_url, timeout=5)
        self.stop_flag = threading.Event()
        self.busy: list[dt.datetime] = []
        self.loads: list[dt.datetime] = []
        self.samples = 0

    def run(self) -> None:
        launches = None
        while not self.stop_flag.is_set():
            counters = self.http.get("/__emulator__/counters").json()
            at = dt.datetime.now(dt.UTC)
            self.samples += 1
            if counters["current_work"] > 0:
                self.busy.append(at)
            if launches is not None and counters["launches"] > launches:
                self.loads.append(at)
            launches = counters["launches"]
            time.sleep(0.01)


def test_usage_is_the_device_time_the_hub_measured_on_a_known_night(
    engine, tiiny, pocket, member, other_member
):
    tiiny.set_speed(SPEED)
    sampler = Sampler(tiiny.base_url)
    sampler.start()
    try:
        video = {"prompt": "a red fox in the snow", "size": "832x480", "seconds": 2, "steps": 4}
        jobs = [
            job_submit(owner=member, device=pocket, kind="video", model_id=VIDEO, params=video),
            job_submit(
                owner=other_member,
                device=pocket,
                kind="music",
                model_id="RoyalCities/Foundation-1",
                params={"prompt": "warm analog bass loop", "seconds": 12, "steps": 50, "cfg_scale": 7},
            ),
            job_submit(
                owner=member,
                device=pocket,
                kind="image",
                model_id="Tongyi-MAI/Z-Image-Turbo",
                params={"prompt": "a lighthouse", "size": "512x512", "n": 1, "steps": 8},
            ),
        ]
        for job in jobs:
            wait_job(job, timeout=90, engine=engine)
        # The span is written where the engine gives the device back, just after the job is marked done.
        deadline = time.monotonic() + 10
        while DeviceUse.objects.filter(job__in=jobs).values("job").distinct().count() < 3:
            assert time.monotonic() < deadline, "every job's device span"
            time.sleep(0.05)
    finally:
        sampler.stop_flag.set()
        sampler.join(timeout=5)

    spans = list(DeviceUse.objects.order_by("started"))
    assert sampler.samples > 100 and sampler.busy and len(sampler.loads) >= 3, (
        sampler.samples,
        sampler.loads,
    )
    # One device, one job at a time: the spans follow each other.
    for before, after in zip(spans, spans[1:], strict=False):
        assert before.ended <= after.started
    # Every instant the device worked lies in a span: the loads too (each job here needed one).
    owner_of = {j.pk: j.owner_id for j in jobs}
    worked: dict[int, int] = {member.pk: 0, other_member.pk: 0}
    for at in sampler.busy:
        inside = [s for s in spans if s.started - TOL <= at <= s.ended + TOL]
        assert inside, f"the device worked at {at:%H:%M:%S.%f} outside every span the hub recorded"
        worked[owner_of[inside[0].job_id]] += 1
    for at in sampler.loads:
        assert any(s.started - TOL <= at <= s.ended + TOL for s in spans), (
            f"a model load at {at} was not counted"
        )
    assert worked[member.pk] > 0 and worked[other_member.pk] > 0
    # Each span is the job's story: from its claim ("Started") to after its end ("Done.").
    for job in jobs:
        events = {e.message.split(" (")[0]: e.at for e in job.events.all()}
        mine = [s for s in spans if s.job_id == job.pk]
        assert mine[0].started <= events["Started"] and mine[-1].ended >= events["Done."]
    # The numbers people see add up to those spans, per person, split by household day.
    for person in (member, other_member):
        recorded = sum(s.seconds for s in spans if s.owner_id == person.pk)
        shown = sum(d.device_s for d in quotas.usage_days(user=person, days=2))
        assert shown == pytest.approx(recorded, abs=1e-3)
        assert recorded > 0
    people = {p.user.pk: p.device_s for p in quotas.usage_people(days=1)}
    assert people[member.pk] == pytest.approx(
        sum(s.seconds for s in spans if s.owner_id == member.pk), abs=1e-3
    )
    assert people[other_member.pk] == pytest.approx(
        sum(s.seconds for s in spans if s.owner_id == other_member.pk), abs=1e-3
    )
