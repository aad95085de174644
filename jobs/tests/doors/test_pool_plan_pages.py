"""The plan across the pool: every device's lane on the dashboard and the queue page, and each waiting job's line
(where and when it is expected to run, after whom, and why there) on the pages, the job page, its pushes and the
REST plan. Two devices; jobs for any device are placed by the pool planner itself (``jobs.queue.pool.rebalance``)."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.utils import timezone

from devices.models import Device
from hub import live
from jobs.live import broadcast, fragments
from jobs.models import Job
from jobs.queue.eta import store_plan
from jobs.queue.pool import rebalance
from jobs.tests.ui_fixtures import VIDEO, make_job

pytestmark = pytest.mark.django_db

MIA_SECRET = "mia's secret lantern festival"
OTTO_SHARED = "otto's open harbour at dawn"


def place(*devices) -> None:
    """What the engine does on a submit: the pool puts each waiting job in its lane, each lane is planned."""
    rebalance()
    for d in devices:
        store_plan(d.pk)


@pytest.fixture
def pool(member, other_member, device, kitchen):
    """Four jobs for any device, oldest first: mia's private one, otto's shared one, then one more each."""
    now = timezone.now()
    specs = [(member, MIA_SECRET, False), (other_member, OTTO_SHARED, True)]
    specs += [(member, "mia's second idea", False), (other_member, "otto's second idea", True)]
    jobs = []
    for i, (owner, prompt, shared) in enumerate(specs):
        job = make_job(
            owner, device, prompt=prompt, shared=shared, pinned=False, pool=[device.pk, kitchen.pk]
        )
        Job.objects.filter(pk=job.pk).update(created=now - dt.timedelta(minutes=10 - i))
        jobs.append(job)
    place(device, kitchen)
    for job in jobs:
        job.refresh_from_db()
    return jobs


def lane(html: str, device) -> str:
    return re.search(rf'id="device-{device.pk}-queue(?:-page)?".*?</section>', html, re.S).group(0)


def entry(html: str, job) -> str:
    return re.search(rf'<li class="plan-item" id="(?:page-)?plan-{job.pk}".*?</li>', html, re.S).group(0)


def text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", html).replace("&#x27;", "'").split())


def test_the_pool_spreads_the_jobs_over_both_lanes(pool, device, kitchen):
    lanes = {job.device_id for job in pool}
    assert lanes == {device.pk, kitchen.pk}
    first, second = pool[0], pool[1]
    assert first.device_id == device.pk  # Pocket is free and holds the video model: no load
    assert second.device_id == kitchen.pk  # Kitchen is free: it finishes it before Pocket could start it
    assert all(job.plan_position for job in pool) and all(job.predicted_start for job in pool)


def test_the_dashboard_shows_every_lane_and_where_each_job_runs(member_client, pool, device, kitchen):
    html = member_client.get("/").content.decode()
    assert f"plan:{device.pk}," in html and f"plan:{kitchen.pk}," in html  # both lanes are watched live
    for job in pool:
        item = entry(lane(html, job.device), job)  # in its own lane's plan
        name = "Pocket" if job.device_id == device.pk else "Kitchen Tiiny"
        assert f"On {name} around" in text(item) and "Any device: " in text(item)
    first, second = pool[0], pool[1]
    assert "Any device: Pocket holds its model" in text(entry(html, first))
    assert "next in line" in text(entry(html, first))
    assert "Any device: Kitchen Tiiny frees first" in text(entry(html, second))


def test_each_line_names_the_job_ahead_as_the_person_may_see_it(
    member_client, viewer_client, pool, device, kitchen
):
    behind_mia = next(j for j in pool if j.device_id == pool[0].device_id and j.plan_position == 2)
    behind_otto = next(j for j in pool if j.device_id == pool[1].device_id and j.plan_position == 2)
    mine = member_client.get("/jobs/queue/").content.decode()
    assert f"after “{MIA_SECRET[:39]}" in text(entry(mine, behind_mia))  # her own job, by its prompt
    assert "after “otto's open harbour at dawn”" in text(entry(mine, behind_otto))  # shared
    for url in ("/", "/jobs/queue/"):
        theirs = viewer_client.get(url).content.decode()
        assert MIA_SECRET not in theirs and "mia's second idea" not in theirs  # never a private prompt
        assert "after mia's video" in text(entry(theirs, behind_mia))
        assert "after “otto's open harbour at dawn”" in text(entry(theirs, behind_otto))


def test_the_queue_page_marks_jobs_for_any_device_in_every_lane(
    admin_client, admin_user, pool, device, kitchen
):
    pinned = make_job(admin_user, kitchen, prompt="only on the kitchen one")
    place(device, kitchen)
    html = admin_client.get("/jobs/queue/").content.decode()
    assert f'id="device-{device.pk}-queue-admin"' in html and f'id="device-{kitchen.pk}-queue-admin"' in html
    for job in pool:
        row = re.search(rf'<li class="qa-item" id="qa-job-{job.pk}".*?</li>', html, re.S).group(0)
        assert "any device" in row
    row = re.search(rf'<li class="qa-item" id="qa-job-{pinned.pk}".*?</li>', html, re.S).group(0)
    assert "any device" not in row
    assert "any device" not in text(entry(html, pinned)).lower()


def test_a_device_that_goes_away_sends_its_pool_jobs_to_the_other_and_the_lines_say_why(
    member_client, member, pool, device, kitchen
):
    pinned = make_job(member, kitchen, prompt="only on the kitchen one")
    Device.objects.filter(pk=kitchen.pk).update(state=Device.State.UNREACHABLE)
    place(device, kitchen)
    assert set(Job.objects.filter(pk__in=[j.pk for j in pool]).values_list("device_id", flat=True)) == {
        device.pk
    }
    html = member_client.get("/").content.decode()
    for job in pool:
        assert "Any device: Kitchen Tiiny is away" in text(entry(lane(html, device), job))
    assert "Only on Kitchen Tiiny, which is away: it waits for it" in text(entry(lane(html, kitchen), pinned))


def test_the_job_page_says_where_and_when_and_its_push_says_it_again(member_client, member, pool, kitchen):
    job = pool[1]  # otto's, shared: mia may open it
    assert job.device_id == kitchen.pk
    html = member_client.get(f"/jobs/{job.pk}/").content.decode()
    line = re.search(rf'id="job-{job.pk}-plan".*?</section>', html, re.S).group(0)
    assert "On Kitchen Tiiny around" in text(line) and "Any device: Kitchen Tiiny" in text(line)
    assert "hidden" not in line.split(">", 1)[0]
    pushed = fragments.render_plan_line(fragments.job_with_related(job.pk))
    assert 'hx-swap-oob="true"' in pushed and text(pushed.split(">", 1)[1]) == text(line.split(">", 1)[1])

    running = make_job(member, kitchen, state="running", prompt="already rendering")
    gone = member_client.get(f"/jobs/{running.pk}/").content.decode()
    assert re.search(rf'id="job-{running.pk}-plan"[^>]* hidden', gone)  # a running job has no plan line


def test_a_lane_change_pushes_the_line_to_an_open_job_page(monkeypatch, pool, device, kitchen):
    job = next(j for j in pool if j.device_id == kitchen.pk)
    live.mark_watched(f"job:{job.pk}")
    sent = []
    send = live._send

    def tap(group, message):
        if group == live.job_group(job.pk):
            sent.append(message)
        send(group, message)

    monkeypatch.setattr(live, "_send", tap)
    live.forget_sent([live.job_group(job.pk)])
    Device.objects.filter(pk=kitchen.pk).update(state=Device.State.LOCKED)
    place(device, kitchen)  # its lane is now Pocket's
    broadcast.broadcast_queue(device.pk)  # (the outbox does this after the replan's commit)
    (message,) = [m for m in sent if live.element_id(m["html"]) == f"job-{job.pk}-plan"]
    assert "On Pocket around" in text(message["html"]) and "Kitchen Tiiny is away" in text(message["html"])
    assert message.get("audience")  # only to those who may view the job


def test_the_pushed_plan_for_everyone_holds_the_lines_without_private_prompts(pool, device, kitchen):
    for d in (device, kitchen):
        running, queue = fragments.queue_fragments(d)
        assert MIA_SECRET not in queue and "mia's second idea" not in queue
        assert "Any device: " in text(queue) and f"On {d.name} around" in text(queue)


# -- the REST plan ------------------------------------------------------------------------------------------------
def test_the_pool_plan_gives_each_job_its_lane_times_and_line(viewer, pool, device, kitchen):
    from jobs.tests.doors.test_api_queue import token_client

    api = token_client(viewer, scopes=("read",))
    plan = api.get("/api/plan").json()
    assert plan["waiting_any"] == len(pool) and plan["devices_usable"] == 2
    rows = {row["id"]: row for d in plan["devices"] for row in d["jobs"]}
    assert set(rows) == {j.pk for j in pool}
    for job in pool:
        row = rows[job.pk]
        name = "Pocket" if job.device_id == device.pk else "Kitchen Tiiny"
        assert (row["device"], row["device_name"], row["pinned"]) == (job.device_id, name, False)
        assert row["pool"] == [device.pk, kitchen.pk] and row["position"] == job.plan_position
        assert row["line"].startswith(f"On {name} around ") and row["why_here"].startswith("any device: ")
        start = dt.datetime.fromisoformat(row["predicted_start"].replace("Z", "+00:00"))
        assert abs(start - job.predicted_start) < dt.timedelta(milliseconds=1)
    assert MIA_SECRET not in str(plan)  # another person's private job: no prompt, not even in a line
    behind_mia = next(j for j in pool if j.device_id == pool[0].device_id and j.plan_position == 2)
    assert ", after mia's video" in rows[behind_mia.pk]["line"]

    lane = api.get(f"/api/devices/{kitchen.pk}/plan").json()
    assert [r["id"] for r in lane["jobs"]] == [j.pk for j in sorted(pool, key=lambda j: j.plan_position)
                                               if j.device_id == kitchen.pk]  # fmt: skip
    assert all(r["device"] == kitchen.pk for r in lane["jobs"])


def test_the_lines_times_are_the_households(settings, viewer, pool, device):
    from zoneinfo import ZoneInfo

    from jobs.tests.doors.test_api_queue import token_client

    settings.TIME_ZONE = "Asia/Tokyo"
    plan = token_client(viewer, scopes=("read",)).get(f"/api/devices/{device.pk}/plan").json()
    first = plan["jobs"][0]
    start = dt.datetime.fromisoformat(first["predicted_start"].replace("Z", "+00:00"))
    assert f"around {start.astimezone(ZoneInfo('Asia/Tokyo')):%H:%M}" in first["line"]


def test_a_model_held_only_here_is_why_a_job_waits_here(member, device, kitchen):
    """Pocket holds the video model and the kitchen another one: the video waits on Pocket, which saves a load."""
    Device.objects.filter(pk=kitchen.pk).update(loaded_models=[{"model_id": "x/other", "status": "running"}])
    job = make_job(member, device, pinned=False, pool=[device.pk, kitchen.pk], estimate_s=60.0)
    place(device, kitchen)
    job.refresh_from_db()
    assert job.device_id == device.pk
    assert "Any device: Pocket holds its model" in text(fragments.queue_fragments(device)[1])
    Device.objects.filter(pk=kitchen.pk).update(loaded_models=[{"model_id": VIDEO, "status": "running"}])
    assert "Any device: Pocket frees first" in text(fragments.queue_fragments(device)[1])  # both hold it
