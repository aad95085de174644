"""A job's news survives the worker that made it (issue 39): 16 image jobs whose owner has a webhook to an allowed
private host, the Celery worker SIGKILLed four times around the moment a job's result is stored and it becomes done.
Each job's "done" reaches the webhook once: a notice written in the transition's transaction
(``jobs.core.notices``) is prepared by the hand-over after the commit or, when the worker died before it, by beat's
sweep (``notify.job_news.notices_sweep``), and the deliveries are keyed on the job's event."""

from __future__ import annotations

import json
import time
from collections import defaultdict

import pytest

from hub.testing import wait_for
from jobs.models import Job, JobState, Notice
from jobs.queue.services import job_submit
from jobs.tests.conftest import wait_job
from notify.models import Delivery, PrivateHost
from notify.services import channel_create
from notify.tests.receivers import start_receiver

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

IMAGE = "Tongyi-MAI/Z-Image-Turbo"
JOBS, KILLS = 16, 4


@pytest.fixture
def hook():
    receiver = start_receiver([200])
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()


def test_every_job_notifies_once_while_the_worker_is_killed_four_times(engine, tiiny, pocket, member, hook):
    tiiny.set_speed(50)
    PrivateHost.objects.create(host="127.0.0.1")  # the worker's process reads what admins allowed
    channel_create(owner=member, kind="webhook", name="hook", url=f"{hook.url}/in", on_started=False)
    jobs = [
        job_submit(
            owner=member,
            device=pocket,
            kind="image",
            model_id=IMAGE,
            params={"prompt": f"a lighthouse at dusk, take {i}", "size": "512x512", "n": 1, "steps": 8},
        )
        for i in range(JOBS)
    ]
    for victim in jobs[1 :: JOBS // KILLS]:  # jobs 1, 5, 9, 13: kill as it is saved or has just become done

        def ending(job=victim) -> bool:
            job.refresh_from_db()
            return job.state in (JobState.COLLECTING, JobState.DONE)

        wait_for(ending, timeout=120, what=f"job {victim.pk} to end")
        engine.kill_worker("e1")
        time.sleep(0.3)
        engine.start_worker("e1")
    for job in jobs:
        wait_job(job, timeout=180, engine=engine)

    try:
        wait_for(
            lambda: (
                not Notice.objects.exists()
                and Delivery.objects.filter(event="job.done", status="sent").count() >= JOBS
            ),
            timeout=120,
            what="every job's news prepared and sent",
        )
    except TimeoutError:
        notices = list(Notice.objects.values_list("job_id", "seq", "kind", "state"))
        deliveries = list(Delivery.objects.values_list("job_id", "event", "status", "reason"))
        raise AssertionError(f"notices left {notices}; deliveries {deliveries}\n{engine.logs()}") from None
    # Each job's "done" arrives under one delivery id. A worker killed mid-send leaves its delivery "sending", sent
    # again under the same id (a receiver keeps one per id); never a second delivery of the same news.
    ids: dict[int, set[str]] = defaultdict(set)
    for request in hook.requests:
        body = json.loads(request.body)
        if body["event"] == "job.done":
            ids[body["job"]["id"]].add(request.headers["x-hub-delivery"])
    assert {pk: len(seen) for pk, seen in ids.items()} == {job.pk: 1 for job in jobs}
    assert Delivery.objects.filter(event="job.done").count() == JOBS  # one delivery id per job
    assert all(Job.objects.get(pk=job.pk).artifacts.exists() for job in jobs)
