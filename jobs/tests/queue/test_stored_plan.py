"""The pages draw the plan the planner stored: each waiting job's place and reason beside its predicted times.

The planner (``jobs.queue.eta.store_plan``) writes ``plan_position`` and ``plan_reason`` with the times; the dashboard,
the queue page and every push of the plan read them a page at a time (``jobs.core.selectors.PagePlan``) instead of
ordering the whole queue again per page. A job not planned yet is ordered as the planner would.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.core.selectors import PagePlan, queue_plan
from jobs.models import Job
from jobs.queue.eta import store_plan
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db


def _order(html: str, prompts: list[str]) -> list[str]:
    return sorted(prompts, key=html.index)


def test_the_planner_stores_each_waiting_jobs_place_and_reason_as_the_scheduler_orders_them(
    member, other_member, device
):
    # The video model is loaded: the later video job runs first (affinity), with its reason.
    a = make_job(member, device, kind="image", prompt="an image")
    b = make_job(other_member, device, kind="speech", prompt="a voice")
    c = make_job(member, device, prompt="a video")
    running = make_job(other_member, device, state="running", prompt="on the device")
    assert store_plan(device.pk) == 4
    live = [j for j in queue_plan(device) if j.pk != running.pk]
    stored = {j.pk: (j.plan_position, j.plan_reason) for j in Job.objects.filter(pk__in=[a.pk, b.pk, c.pk])}
    assert [j.pk for j in live] == sorted(stored, key=lambda pk: stored[pk][0]) == [c.pk, a.pk, b.pk]
    assert [stored[j.pk] for j in live] == [(i, j.plan_reason) for i, j in enumerate(live, start=1)]
    assert stored[c.pk][1] == "runs first: its model is already loaded"
    assert Job.objects.get(pk=running.pk).plan_position is None  # the running job has no place in line
    assert store_plan(device.pk) == 0  # nothing changed: nothing written
    # Once it runs, a job gives its place up: requeued, it is ordered afresh, not put back where it was.
    Job.objects.filter(pk=c.pk).update(state="running")
    store_plan(device.pk)
    assert Job.objects.get(pk=c.pk).plan_position is None
    Job.objects.filter(pk=c.pk).update(state="queued")
    assert PagePlan(device)._rows is not None  # not planned: ordered as the planner would


def test_a_new_place_or_reason_is_written_even_when_no_time_moved(member, device):
    a = make_job(member, device, kind="image", prompt="first", estimate_s=0.0)
    b = make_job(member, device, kind="image", prompt="second", estimate_s=0.0)
    store_plan(device.pk)
    assert list(
        Job.objects.filter(pk__in=[a.pk, b.pk]).order_by("plan_position").values_list("pk", flat=True)
    ) == [
        a.pk,
        b.pk,
    ]
    Job.objects.filter(pk=b.pk).update(priority=1)  # an admin's move: b first, the same (zero-length) times
    assert store_plan(device.pk) == 2
    assert Job.objects.get(pk=b.pk).plan_position == 1
    assert Job.objects.get(pk=b.pk).plan_reason == "moved up by an admin"


def test_pages_draw_the_stored_plan_and_do_not_order_it_again(member_client, member, device):
    jobs = [make_job(member, device, kind="image", prompt=f"picture {i}") for i in range(3)]
    store_plan(device.pk)
    # What the planner stored is what is drawn: place and reason (here set by hand to tell them apart).
    for place, job in zip((3, 1, 2), jobs, strict=True):
        Job.objects.filter(pk=job.pk).update(plan_position=place, plan_reason=f"stored reason {place}")
    for url in ("/", "/jobs/queue/"):
        html = member_client.get(url).content.decode()
        assert _order(html, ["picture 0", "picture 1", "picture 2"]) == [
            "picture 1",
            "picture 2",
            "picture 0",
        ]
        assert "Stored reason 1" in html
    with CaptureQueriesContext(connection) as ctx:
        plan = PagePlan(device)
        assert [j.pk for j in plan.jobs(0, 2)] == [jobs[1].pk, jobs[2].pk]
    assert len(ctx.captured_queries) == 3  # the active job, the count and end, the entries drawn
    assert plan.waiting == 3 and plan.end == max(
        j.predicted_finish for j in Job.objects.filter(device=device)
    )


def test_a_job_not_planned_yet_is_ordered_as_the_planner_would(member_client, member, other_member, device):
    make_job(member, device, kind="image", prompt="an image", shared=True)
    store_plan(device.pk)
    make_job(
        other_member, device, prompt="a video, just sent", shared=True
    )  # no place yet: its replan has not run
    plan = PagePlan(device)
    assert plan.waiting == 2
    assert [j.prompt for j in plan.jobs(0, 5)] == ["a video, just sent", "an image"]  # its model is loaded
    html = member_client.get("/").content.decode()
    assert html.index("a video, just sent") < html.index("an image")
    assert "Runs first: its model is already loaded" in html


def test_the_pages_pager_counts_the_stored_plan(viewer_client, member, device):
    from jobs.live.fragments import QUEUE_PAGE_SIZE

    for i in range(QUEUE_PAGE_SIZE + 2):
        make_job(member, device, kind="speech", prompt=f"line {i:02d}", shared=True)
    store_plan(device.pk)
    html = viewer_client.get(f"/jobs/queue/?device={device.pk}&page=2").content.decode()
    assert f"line {QUEUE_PAGE_SIZE:02d}" in html and f"line {QUEUE_PAGE_SIZE + 1:02d}" in html
    assert "line 00" not in html and f"{QUEUE_PAGE_SIZE + 2} waiting" in html


def test_pausing_the_queue_stores_the_reason_the_pages_show(
    admin_client, member, device, django_capture_on_commit_callbacks
):
    make_job(member, device, kind="speech", prompt="a voice")
    make_job(member, device, kind="image", prompt="an image")
    store_plan(device.pk)
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(f"/jobs/queue/{device.pk}/pause/")
    assert set(Job.objects.filter(device=device).values_list("plan_reason", flat=True)) == {
        "paused by an admin"
    }
    assert "Paused by an admin" in admin_client.get("/").content.decode()


def _more_devices(n: int) -> list:
    from devices.models import Device
    from devices.services import device_register

    out = []
    for i in range(n):
        d = device_register(
            name=f"Pocket {i + 2}", kind="tiiny", base_url=f"http://127.0.0.{i + 2}:9", api_key="k"
        )
        Device.objects.filter(pk=d.pk).update(state=Device.State.ONLINE)
        out.append(Device.objects.get(pk=d.pk))
    return out


def test_the_plans_of_several_devices_are_those_each_reads_alone(member, other_member, device):
    busy, idle = _more_devices(2)
    for d in (device, busy):
        make_job(member, d, state="running", prompt=f"on {d.name}")
        for i in range(3):
            make_job(other_member, d, kind="image", prompt=f"waits {i} on {d.name}")
        store_plan(d.pk)
    with CaptureQueriesContext(connection) as ctx:
        PagePlan.for_devices([device, busy, idle])
    assert len(ctx.captured_queries) == 2  # the active jobs, the waiting jobs' counts and ends
    make_job(member, busy, kind="image", prompt="not planned yet")  # ordered here, as the planner would
    plans = PagePlan.for_devices([device, busy, idle])
    for d in (device, busy, idle):
        alone, together = PagePlan(d), plans[d.pk]
        assert (together.waiting, together.end) == (alone.waiting, alone.end)
        assert [j.pk for j in together.active] == [j.pk for j in alone.active]
        assert together.running is None or together.running.owner == member  # the owner came with it
        assert [j and j.pk for j in together.jobs(0, 10)] == [j and j.pk for j in alone.jobs(0, 10)]
    assert plans[busy.pk].waiting == 4 and plans[device.pk].waiting == 3
    assert plans[idle.pk].waiting == 0 and plans[idle.pk].running is None and plans[idle.pk].end is None
    with CaptureQueriesContext(connection) as ctx:
        assert plans[idle.pk].jobs(0, 8) == []
    assert not ctx.captured_queries  # nothing waiting: nothing to read
