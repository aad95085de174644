"""A cancel while the broker (the run's Redis) is down: the cancel stands, the person gets a normal answer, and
beat's reconcile tells the device once the broker is back (found by ``make chaos``: the page answered 500).

Real parts throughout: the run's private Redis is SIGKILLed and started again on the same port (the outermost
seam: nothing in the hub is patched), a real worker and beat, the Tiiny emulator over HTTP.
"""

from __future__ import annotations

import json

import pytest

from jobs.tests.queue.test_chaos import _driver, _redis
from jobs.tests.queue.test_engine_tiiny import _rendering, _until, video

pytestmark = pytest.mark.integration


def test_a_cancel_while_redis_is_down_stands_and_reaches_the_device_once_it_is_back(
    engine, tiiny, pocket, member, member_client
):
    from django.test import Client

    from hub.accounts.tokens import token_create
    from hub.testing import wait_for
    from jobs.models import Job

    redis = _redis(_driver())
    _, raw = token_create(user=member, name="script", scopes=["read", "submit"])
    api = Client(headers={"Authorization": f"Bearer {raw}"})
    tiiny.set_speed(20)  # a 2 s video takes ~20 s here: it still renders when the stop arrives
    rendering = video(member, pocket)
    _until(_rendering(rendering), timeout=30, what="the render to start")
    after, dropped = video(member, pocket), video(member, pocket)  # queued behind it
    worker, back = engine.workers["e1"], f"Connected to redis://:**@127.0.0.1:{redis.port}/"
    connected, crashes = worker.log_tail(100000).count(back), worker.log_tail(100000).count("Unrecoverable")
    redis.kill()
    try:
        page = member_client.post(f"/jobs/{rendering.pk}/cancel/", {"reason": "wrong prompt"})
        rest = api.post(f"/api/jobs/{dropped.pk}/cancel", json.dumps({}), content_type="application/json")
        rendering.refresh_from_db()
        stops_while_down = [k for k in tiiny.counters()["requests"] if k.startswith("DELETE /v1/videos")]
    finally:
        redis.start()
    # The worker reconnects by itself. kombu 5.7 used to crash it here in 2 runs of 3 ("Unrecoverable error:
    # AttributeError: 'NoneType' object has no attribute 'hostname'", restoring its unacknowledged messages);
    # hub.celery.close_redis_channels_despite_a_dead_brpop keeps it up (hub/tests/test_broker_loss_close.py).
    wait_for(
        lambda: worker.log_tail(100000).count(back) > connected,
        timeout=30,
        what="the worker back on the broker",
        proc=worker,
    )
    assert worker.log_tail(100000).count("Unrecoverable") == crashes, worker.log_tail(80)
    assert page.status_code == 302, page.content  # back to the page, with "Cancelled."
    assert rest.status_code == 200 and rest.json()["state"] == "cancelled", rest.content
    assert rendering.state == "cancelled" and rendering.cancel_reason == "wrong prompt"
    assert any("will be told shortly" in e.message for e in rendering.events.all())
    assert stops_while_down == []  # nobody could have told the device yet

    # Reconcile (beat, every second here) finds the cancelled render still holding the device and stops it.
    _until(
        lambda: rendering.events.filter(message__startswith="Stopped on the device").exists(),
        timeout=40,
        what="the stop delivered by reconcile",
    )
    requests = tiiny.counters()["requests"]
    assert any(k.startswith("DELETE /v1/videos") for k in requests)
    assert any(k.endswith("/stop") for k in requests)
    # Only then the next job: nothing started on the device while the cancelled render could still run there.
    tiiny.set_speed(600)
    _until(lambda: Job.objects.get(pk=after.pk).state == "done", timeout=60, what="the next job")
    after.refresh_from_db()
    stopped = rendering.events.get(message__startswith="Stopped on the device")
    assert after.started_at >= stopped.at
    assert Job.objects.get(pk=dropped.pk).state == "cancelled"
