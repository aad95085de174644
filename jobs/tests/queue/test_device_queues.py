"""Which Celery queue each task goes to (issue 26: workers beside their devices), seen in the run's real Redis.

A task that talks to a device goes to ``device.<pk>``; the rest to the default queue. These tests run inside an
uncommitted transaction, so the session's worker (which consumes only the queues of devices it can read) never
takes a message they send: what they send stays in Redis for them to read, and is deleted after.
"""

from __future__ import annotations

import base64
import json

import pytest
import redis
from django.conf import settings
from django.core.cache import cache

from devices import tasks as device_tasks
from devices.models import Device
from devices.services import device_register
from hub.celery import DEFAULT_QUEUE, device_queue, worker_device_names
from hub.env import SettingError
from hub.live import watch_key
from jobs.queue import enqueue
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def broker():
    client = redis.Redis.from_url(settings.REDIS_URL)
    made: list[str] = []

    def messages(queue: str) -> list[dict]:
        """The messages waiting in ``queue`` (kombu's Redis transport: one list per queue), as task and args."""
        made.append(queue)
        out = []
        for raw in reversed(client.lrange(queue, 0, -1)):  # LPUSH: the newest first
            message = json.loads(raw)  # kombu's envelope: the body base64-encoded
            body = json.loads(base64.b64decode(message["body"]))
            out.append({"task": message["headers"]["task"], "args": list(body[0])})
        return out

    yield messages
    for queue in made:
        client.delete(queue)


def _second_device() -> Device:
    return device_register(name="Office", kind="tiiny", base_url="http://127.0.0.1:9", api_key="k")


# -- the routing table --------------------------------------------------------------------------------------------


def test_a_device_queue_is_named_by_the_device():
    assert device_queue(7) == "device.7"
    assert device_queue("12") == "device.12"


def test_every_task_that_talks_to_a_device_goes_to_its_queue(member, device):
    other = _second_device()
    job = make_job(member, device, state="running")
    theirs = make_job(member, other, state="running")

    assert enqueue.queue_for("dispatch", (device.pk,)) == f"device.{device.pk}"
    assert enqueue.queue_for("dispatch", (other.pk,)) == f"device.{other.pk}"
    for task, args in [
        ("run_job", (job.pk,)),
        ("poll_job", (job.pk, 3)),
        ("recover_job", (job.pk,)),
        ("cancel_on_device", (job.pk,)),
    ]:
        assert enqueue.queue_for(task, args) == f"device.{device.pk}", task
        assert enqueue.queue_for(task, (theirs.pk, *args[1:])) == f"device.{other.pk}", task


def test_work_that_touches_no_device_stays_on_the_default_queue(member, device):
    job = make_job(member, device, state="done")
    for task, args in [
        ("make_thumbnail", (job.pk,)),
        ("plan", (device.pk,)),
        ("reconcile", ()),
        ("sweep_thumbnails", ()),
    ]:
        assert enqueue.queue_for(task, args) is None, task  # None: Celery's default queue


def test_a_job_that_is_gone_goes_to_the_default_queue_where_its_task_finds_nothing_to_do():
    assert enqueue.queue_for("run_job", (987654,)) is None


# -- what reaches the broker -------------------------------------------------------------------------------------


def test_send_puts_a_device_task_on_its_device_queue_in_redis(member, device, broker):
    job = make_job(member, device, state="preparing")

    enqueue.send("run_job", job.pk, soft_time_limit=700, time_limit=760)
    enqueue.send("poll_job", job.pk, 5, countdown=0)

    assert broker(device_queue(device.pk)) == [
        {"task": "jobs.tasks.run_job", "args": [job.pk]},
        {"task": "jobs.tasks.poll_job", "args": [job.pk, 5]},
    ]


def test_an_explicit_queue_is_kept(member, device, broker):
    job = make_job(member, device, state="preparing")
    enqueue.send("recover_job", job.pk, queue="device.elsewhere")
    assert broker("device.elsewhere") == [{"task": "jobs.tasks.recover_job", "args": [job.pk]}]
    assert broker(device_queue(device.pk)) == []


def test_the_device_poller_polls_each_device_on_its_own_queue(device, broker):
    other = _second_device()
    Device.objects.update(next_poll_at=None)
    # Nobody watches them: a page of another test (another xdist worker, the same device ids) may have left its
    # mark in the shared cache, and a watched device whose job polls it yields its tick.
    cache.delete_many([watch_key(f"device:{d.pk}") for d in (device, other)])

    assert device_tasks.poll_all() == 2

    assert broker(device_queue(device.pk)) == [{"task": "devices.tasks.poll_device", "args": [device.pk]}]
    assert broker(device_queue(other.pk)) == [{"task": "devices.tasks.poll_device", "args": [other.pk]}]


# -- which devices a worker drives --------------------------------------------------------------------------------


def test_hub_worker_devices_is_a_list_of_names_unset_means_every_device_and_none_no_device(monkeypatch):
    monkeypatch.delenv("HUB_WORKER_DEVICES", raising=False)
    assert worker_device_names() is None
    monkeypatch.setenv("HUB_WORKER_DEVICES", "  ")
    assert worker_device_names() is None
    monkeypatch.setenv("HUB_WORKER_DEVICES", "None")
    assert worker_device_names() == []
    monkeypatch.setenv("HUB_WORKER_DEVICES", "Pocket, Office ,")
    assert worker_device_names() == ["Pocket", "Office"]


def test_names_resolve_to_the_devices_ids_in_order(device):
    other = _second_device()
    assert device_tasks.worker_device_ids(["Office", "Pocket", "Office"]) == [other.pk, device.pk]


def test_an_unknown_name_is_one_line_naming_it_and_the_devices_there_are(device):
    with pytest.raises(SettingError) as caught:
        device_tasks.worker_device_ids(["Pocket", "Garage"])
    message = str(caught.value)
    assert "\n" not in message
    assert "'Garage'" in message and "Pocket" in message and "HUB_WORKER_DEVICES" in message


def test_a_worker_limited_to_devices_consumes_their_queues_every_other_one_every_device(monkeypatch, device):
    other = _second_device()
    monkeypatch.setenv("HUB_WORKER_DEVICES", "Office")
    assert device_tasks.worker_device_queues() == [device_queue(other.pk)]
    monkeypatch.setenv("HUB_WORKER_DEVICES", "none")
    assert device_tasks.worker_device_queues() == []
    monkeypatch.delenv("HUB_WORKER_DEVICES")
    assert sorted(device_tasks.worker_device_queues()) == sorted(
        [device_queue(device.pk), device_queue(other.pk)]
    )
    # The default queue is Celery's own: make up's worker, and any other, takes it as before.
    assert DEFAULT_QUEUE == "celery"
