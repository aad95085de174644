"""A job's pool follows the devices (``jobs.queue.membership``): a device added, or one that gains a model, joins
the pools of the waiting jobs it can do exactly; one that can no longer do a job leaves its pool (never the last).

The hook is the device layer's (``devices.services.device_save_capabilities``, after commit), as a device's poll
stores what it reports. The Celery work the pool queues is recorded (``sent``), never sent to a broker.
"""

from __future__ import annotations

import pytest

from devices import hooks as device_hooks
from devices.capabilities import Capabilities
from devices.models import Device
from devices.services import device_save_capabilities
from jobs.doors import intake
from jobs.models import Job
from jobs.queue import enqueue, membership
from jobs.tests.ui_fixtures import IMAGE, MESH, VIDEO, another_tiiny, capabilities, make_job

pytestmark = pytest.mark.django_db

FIELDS = {"model": VIDEO, "prompt": "a fox", "size": "832x480", "seconds": "2", "steps": "4"}


@pytest.fixture
def sent(monkeypatch):
    out: list[tuple[str, tuple]] = []
    monkeypatch.setattr(enqueue, "send", lambda task, *args, **options: out.append((task, args)))
    return out


def for_any_device(owner, **fields) -> Job:
    """A video for "any device", through the doors' own check (each device's form and admission)."""
    job, _admission = intake.submit_request_any(owner=owner, kind="video", data={**FIELDS, **fields})
    return job


def without(model_id: str) -> Capabilities:
    caps = Capabilities.from_dict(capabilities())
    caps.models = [m for m in caps.models if m.id != model_id]
    caps.video = {k: v for k, v in caps.video.items() if k != model_id}
    return caps


def report(device, caps: Capabilities, capture) -> None:
    """The device's poll stores what it reports, and the hooks run after commit."""
    with capture(execute=True):
        device_save_capabilities(device_id=device.pk, caps=caps)


def story(job: Job) -> list[str]:
    return list(job.events.order_by("seq").values_list("message", flat=True))


def test_a_tiiny_added_later_joins_the_waiting_jobs_for_any_device_and_takes_work_at_once(
    device, member, sent, django_capture_on_commit_callbacks
):
    make_job(member, device, state="running", estimate_s=3600, progress=0.0)  # Pocket is busy for an hour
    waiting = [for_any_device(member, prompt=f"fox {i}") for i in range(3)]
    pinned = make_job(member, device)  # for Pocket itself
    assert all(job.pool == [device.pk] and not job.pinned for job in waiting)

    shelf = another_tiiny("Shelf", caps={}, state="unknown")  # just added: nothing reported yet
    report(shelf, Capabilities.from_dict(capabilities()), django_capture_on_commit_callbacks)

    for job in waiting:
        job.refresh_from_db()
        assert job.pool == sorted([device.pk, shelf.pk])
        assert "Shelf can run it now too: it may run there." in story(job)
    assert {job.device_id for job in waiting} == {shelf.pk}  # Pocket is busy for an hour: the shelf is sooner
    assert ("dispatch", (shelf.pk,)) in sent
    pinned.refresh_from_db()
    assert pinned.pinned and pinned.device_id == device.pk and pinned.pool == []


def test_a_device_without_the_jobs_model_or_size_does_not_join(
    device, member, sent, django_capture_on_commit_callbacks
):
    video = for_any_device(member)
    tall = for_any_device(member, size="1344x768")
    shelf = another_tiiny("Shelf", caps={}, state="unknown")
    report(shelf, without(VIDEO), django_capture_on_commit_callbacks)
    video.refresh_from_db()
    assert video.pool == [device.pk]

    small = Capabilities.from_dict(capabilities())
    small.video[VIDEO].canvases = ["832x480", "480x832"]  # the shelf renders the small canvases only
    report(shelf, small, django_capture_on_commit_callbacks)
    video.refresh_from_db()
    tall.refresh_from_db()
    assert video.pool == sorted([device.pk, shelf.pk])
    assert tall.pool == [device.pk]  # its form there would refuse 1344x768: not exactly this request


def test_a_device_that_lost_the_model_leaves_the_pools_and_its_jobs_move_on(
    device, member, sent, django_capture_on_commit_callbacks
):
    shelf = another_tiiny("Shelf")
    job = for_any_device(member)
    assert job.pool == sorted([device.pk, shelf.pk])
    Job.objects.filter(pk=job.pk).update(device=shelf)  # it waits on the shelf

    report(shelf, without(VIDEO), django_capture_on_commit_callbacks)

    job.refresh_from_db()
    assert job.pool == [device.pk] and job.device_id == device.pk
    assert "Shelf can no longer run it (what the device reports changed)." in story(job)


def test_the_last_device_of_a_pool_stays_in_it(device, member, sent, django_capture_on_commit_callbacks):
    job = for_any_device(member)
    report(device, without(VIDEO), django_capture_on_commit_callbacks)
    job.refresh_from_db()
    assert job.pool == [device.pk] and job.device_id == device.pk


def test_a_report_that_only_changes_which_model_is_loaded_tells_nobody(
    device, monkeypatch, django_capture_on_commit_callbacks
):
    heard: list[int] = []
    monkeypatch.setattr(
        device_hooks, "_device_capabilities_changed", [lambda *, device_id: heard.append(device_id)]
    )
    caps = Capabilities.from_dict(capabilities())
    for m in caps.models:
        m.loaded = m.id == MESH
    caps.npu_available = 17
    report(device, caps, django_capture_on_commit_callbacks)
    assert heard == []

    report(device, without(IMAGE), django_capture_on_commit_callbacks)
    assert heard == [device.pk]
    assert Device.objects.get(pk=device.pk).capabilities == without(IMAGE).to_dict()


def test_takes_needs_the_kind_there(device, member):
    job = for_any_device(member)
    shelf = another_tiiny("Shelf", caps={})
    assert not membership.takes(shelf, job)
    assert membership.takes(device, job)
