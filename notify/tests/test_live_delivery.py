"""End to end on the emulator with the real worker: a job finishes -> its delivery is sent by the worker (a
Celery task after commit), signed, to a receiver on loopback; a failing channel is retried by the worker with a
countdown, each attempt on record, while the queue goes on and the jobs keep their results."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from hub.testing import wait_for
from jobs.models import Job
from jobs.tests.conftest import make_device, wait_job
from notify.models import Delivery, PrivateHost
from notify.services import channel_create

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
SECRET = "whsec-live-0c9d8e7f6a5b"


@pytest.fixture
def pocket(tiiny):
    return make_device(tiiny)


def _submit(owner, device, prompt):
    from jobs.queue.services import job_submit
    from jobs.tests.ui_fixtures import VIDEO

    params = {"prompt": prompt, "size": "832x480", "seconds": 2, "steps": 4}
    return job_submit(owner=owner, device=device, kind="video", model_id=VIDEO, params=params)


def test_finished_jobs_are_delivered_by_the_worker_and_a_failing_channel_blocks_nothing(
    member, pocket, tiiny, live_worker, receiver
):
    from hub.tests.leakguard import register_key

    register_key(SECRET, "a webhook secret")
    PrivateHost.objects.create(host="127.0.0.1")  # the worker's own process reads what admins allowed
    good, bad = receiver([200]), receiver([500, 200])
    channel_create(owner=member, kind="webhook", name="good", url=f"{good.url}/in", secret=SECRET)
    failing = channel_create(owner=member, kind="webhook", name="flaky", url=f"{bad.url}/in", secret=SECRET)

    first = _submit(member, pocket, "first fox")
    second = _submit(member, pocket, "second fox")
    wait_job(first, timeout=120)
    wait_job(second, timeout=120)  # the queue went on while the flaky channel failed

    got = good.wait(2, timeout=60)
    bodies = [json.loads(r.body) for r in got]
    assert sorted(b["job"]["id"] for b in bodies) == sorted([first.pk, second.pk])
    assert {b["event"] for b in bodies} == {"job.done"}
    for r in got:  # signed by the worker's process with the channel's secret
        mac = hmac.new(SECRET.encode(), r.headers["x-hub-timestamp"].encode() + b"." + r.body, hashlib.sha256)
        assert r.headers["x-hub-signature-256"] == "sha256=" + mac.hexdigest()
    wait_for(
        lambda: Delivery.objects.filter(channel__name="good", status="sent").count() == 2,
        timeout=30,
        what="both good deliveries recorded as sent",
    )

    # the flaky channel: attempt 1 answered 500 (retrying, with the reason), the worker's countdown retry got 200
    bad.wait(3, timeout=90)
    wait_for(
        lambda: Delivery.objects.filter(channel=failing, status="sent").count() == 2,
        timeout=60,
        what="the flaky channel's retries to be sent",
    )
    rows = list(
        Delivery.objects.filter(channel=failing)
        .order_by("job_id", "attempt")
        .values_list("job_id", "attempt", "status", "reason")
    )
    retried = [r for r in rows if r[2] == "retrying"]
    assert len(retried) == 1 and retried[0][1] == 1 and retried[0][3] == "refused: HTTP 500"
    assert [r[2] for r in rows if r[0] == retried[0][0]] == ["retrying", "sent"]
    for job in (first, second):
        job = Job.objects.get(pk=job.pk)
        assert job.state == "done" and job.artifacts.exists()
