"""Fixtures for the job engine's integration tests: our own workers and beat, devices backed by emulators.

The engine tests control workers (SIGKILL one mid-render, run two at once), so they must be the only consumers
of the broker: the ``engine`` fixture takes it from the session's ``live_worker``/``live_beat`` (stopped, and
started again by the next test that asks for them: hub.testing.take_broker). Short intervals reach the workers
through their environment.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

from hub.testing import Proc, start_beat, start_worker, take_broker, wait_for

ENGINE_ENV = {
    "JOBS_POLL_INTERVAL_S": "0.2",
    "JOBS_POLL_MAX_S": "0.6",
    "JOBS_LEASE_TTL_S": "3",
    "JOBS_DEVICE_POLL_S": "0.05",
    "JOBS_LOAD_GRACE_S": "0.05",
    "JOBS_RECONCILE_S": "1",
    "JOBS_DISK_RETRY_S": "0.5",  # a result that found the disk full is tried again soon
    "NOTIFY_SWEEP_S": "1",  # a job's news lost with a killed worker is prepared soon (notify.job_news)
    "NOTIFY_NOTICE_GRACE_S": "1",
    # A delivery whose worker was killed mid-send, or whose task died with it, is sent again within seconds.
    "NOTIFY_CLAIM_STALE_S": "5",
    "NOTIFY_SWEEP_AFTER_S": "2",
    "NOTIFY_RETRY_DELAYS_S": "1",
}


@dataclass
class Engine:
    workers: dict[str, Proc] = field(default_factory=dict)
    beat: Proc | None = None

    def start_worker(self, name: str, concurrency: int = 2) -> Proc:
        proc = start_worker(name, concurrency=concurrency, **ENGINE_ENV)
        self.workers[name] = proc
        return proc

    def kill_worker(self, name: str) -> None:
        self.workers.pop(name).kill()

    def stop_all(self) -> None:
        for proc in self.workers.values():
            proc.stop()
        self.workers.clear()

    def release(self) -> None:
        """Stop every worker and the beat (another set of processes takes the broker, or the run ends)."""
        self.stop_all()
        if self.beat is not None:
            self.beat.stop()

    def take_broker(self) -> None:
        """Be the broker's only consumers, with the beat running."""
        # Named per Engine: another app's conftest that imports these fixtures has an engine session of its own
        # (backups/tests), and the two must hand the broker over to each other like any other consumers. Under one
        # name, a jobs test's workers kept consuming while the backups test's engine ran, and went on with its jobs.
        take_broker(f"engine-{id(self)}", self.release)
        if self.beat is None:
            self.beat = start_beat(**ENGINE_ENV)
        elif not self.beat.alive():
            self.beat.start_and_wait()

    def ensure(self, names: tuple[str, ...] = ("e1",)) -> None:
        for name in list(self.workers):
            if name not in names or not self.workers[name].alive():
                self.workers.pop(name).stop()
        for name in names:
            if name not in self.workers:
                self.start_worker(name)

    def logs(self) -> str:
        return "\n".join(f"--- {n}\n{p.log_tail(60)}" for n, p in self.workers.items())


@pytest.fixture(scope="session")
def engine_session(django_db_setup):
    engine = Engine()
    yield engine
    engine.release()


@pytest.fixture
def engine(engine_session, transactional_db):
    """One worker (``e1``) and the engine's beat, running with short intervals; tests may start, kill and add
    more workers."""
    engine_session.take_broker()
    engine_session.ensure(("e1",))
    yield engine_session
    time.sleep(0.2)  # let in-flight tasks of this test settle before the database is flushed


def make_device(emulator, *, kind: str = "tiiny", name: str = "Pocket"):
    from devices.clients import TensorSharpClient, TiinyClient
    from devices.models import Device
    from devices.services import device_register, device_save_capabilities

    device = device_register(
        name=name, kind=kind, base_url=emulator.base_url, api_key=emulator.api_key if kind == "tiiny" else ""
    )
    client = (
        TiinyClient(emulator.base_url, emulator.api_key)
        if kind == "tiiny"
        else TensorSharpClient(emulator.base_url)
    )
    with client:
        caps = client.capabilities()
    device_save_capabilities(device_id=device.pk, caps=caps)
    Device.objects.filter(pk=device.pk).update(state=Device.State.ONLINE)
    device.refresh_from_db()
    return device


@pytest.fixture
def pocket(tiiny):
    return make_device(tiiny)


@pytest.fixture
def ts_device(tensorsharp):
    return make_device(tensorsharp, kind="tensorsharp", name="TensorSharp")


def wait_job(job, states=("done",), timeout: float = 30.0, engine: Engine | None = None):
    def reached() -> bool:
        job.refresh_from_db()
        return job.state in states

    try:
        wait_for(reached, timeout=timeout, what=f"job {job.pk} to reach {states}")
    except TimeoutError:
        story = "\n".join(f"  {e.seq} {e.state}: {e.message}" for e in job.events.order_by("seq"))
        raise AssertionError(
            f"job {job.pk} is {job.state} ({job.phase}):\n{story}\n{engine.logs() if engine else ''}"
        ) from None
    return job


def wait_thumbnail(job, timeout: float = 20.0) -> None:
    """A done job's thumbnail is made by its own task after the device is free: wait for it."""
    wait_for(
        lambda: job.artifacts.filter(kind="thumb").exists(), timeout=timeout, what=f"job {job.pk}'s thumbnail"
    )
