"""Workers beside their devices (issue 26): two real workers, each limited to one emulated Tiiny by
``HUB_WORKER_DEVICES``, drive only their own device's jobs; a worker killed mid-render hands its device to the
next worker started for it, once the lease lapses, and the render is collected once.

Which worker drove a job is read in the workers' logs: with ``HUB_DEBUG_LOGGERS=jobs`` the engine writes a
``trace job=<id> step=<step>`` line at each step of a job (claimed, run sent, submitted, polled, collecting).
"""

from __future__ import annotations

import re

import pytest

from devices.emulator.testing import run_tiiny
from hub.testing import Proc, start_worker, wait_for
from jobs.tests.conftest import ENGINE_ENV, make_device, wait_job
from jobs.tests.queue.test_engine_tiiny import video

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def office_emulator():
    """A second Tiiny, for the device at the office."""
    with run_tiiny(speed=3000, api_key="office-key", quirks="none") as emulator:
        yield emulator


@pytest.fixture
def office(office_emulator):
    office_emulator.reset()
    yield office_emulator
    if office_emulator.process.poll() is None:
        office_emulator.reset()


def limited_worker(engine, name: str, devices: str) -> Proc:
    """A worker of the engine's (stopped with it) that drives only ``devices``."""
    proc = start_worker(name, **ENGINE_ENV, HUB_WORKER_DEVICES=devices, HUB_DEBUG_LOGGERS="jobs")
    engine.workers[name] = proc
    return proc


def jobs_driven(proc: Proc) -> set[int]:
    """The jobs whose steps this worker ran (its trace lines)."""
    return {int(n) for n in re.findall(r"trace job=(\d+) step=", proc.log_text())}


def consumed_queues(proc: Proc) -> set[str]:
    """The queues the worker's banner lists, and those it started consuming since."""
    text = proc.log_text()
    return set(re.findall(r"\.> (\S+)\s+exchange=", text)) | set(
        re.findall(r"Started consuming from (\S+)", text)
    )


def test_each_device_is_driven_by_its_own_worker_and_a_killed_one_hands_over(engine, tiiny, office, member):
    engine.stop_all()  # the engine's e1 drives every device: only the two limited workers run here
    home = make_device(tiiny, name="Home")
    away = make_device(office, name="Office")
    worker_home = limited_worker(engine, "home", "Home")
    worker_office = limited_worker(engine, "office", "Office")
    assert consumed_queues(worker_home) == {"celery", f"device.{home.pk}"}
    assert consumed_queues(worker_office) == {"celery", f"device.{away.pk}"}

    at_home, at_office = video(member, home), video(member, away, prompt="a heron at dawn")
    wait_job(at_home, timeout=60, engine=engine)
    wait_job(at_office, timeout=60, engine=engine)
    assert at_home.pk in jobs_driven(worker_home) and at_home.pk not in jobs_driven(worker_office)
    assert at_office.pk in jobs_driven(worker_office) and at_office.pk not in jobs_driven(worker_home)
    assert tiiny.counters()["renders_submitted"] == 1 and office.counters()["renders_submitted"] == 1

    # The home worker dies mid-render (SIGKILL: its countdown poll dies with it); the office worker, which can't
    # reach the home device, never takes the job over; the next worker started at home does, once.
    tiiny.set_speed(50)  # ~8 s of render: room to kill the worker in the middle
    job = video(member, home, prompt="a lighthouse in a storm")

    def rendering() -> bool:
        job.refresh_from_db()
        return job.state == "running" and bool(job.remote_id)

    wait_for(rendering, timeout=30, what="the render to start")
    remote_id = job.remote_id
    engine.kill_worker("home")
    worker_home2 = limited_worker(engine, "home2", "Home")
    wait_job(job, timeout=60, engine=engine)

    assert job.remote_id == remote_id  # the same render, collected
    assert tiiny.counters()["renders_submitted"] == 2  # the first job's and this one's: never submitted again
    assert job.pk in jobs_driven(worker_home2)
    assert job.pk not in jobs_driven(worker_office)
    assert job.artifacts.exclude(kind="thumb").get().name == "video.mp4"
