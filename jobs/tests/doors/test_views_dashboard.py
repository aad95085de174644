from __future__ import annotations

import pytest
from django.test import Client

from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db


def test_it_sends_anonymous_people_to_sign_in():
    assert Client().get("/").status_code == 302


def test_it_shows_devices_gauges_and_the_empty_state(member_client, device):
    page = member_client.get("/")
    html = page.content.decode()
    assert page.status_code == 200
    assert f'id="device-{device.pk}-card"' in html and f'id="device-{device.pk}-gauges"' in html
    assert f'id="device-{device.pk}-running"' in html and f'id="device-{device.pk}-queue"' in html
    assert "No jobs yet — queue your first render" in html
    assert f"watch=device:{device.pk},plan:{device.pk}," in html  # exactly the topics it shows
    assert 'id="live-wire-button"' not in html  # the live-wire check is for admins (issue 11)


def test_it_shows_the_running_job_progress_and_eta(member_client, member, device):
    make_job(member, device, state="running", shared=True)
    html = member_client.get("/").content.decode()
    assert 'value="37"' in html and "Rendering step 3 of 4" in html and "ready ≈" in html


def test_it_hides_other_peoples_private_prompts_in_the_plan(other_client, member, device):
    make_job(member, device, prompt="my secret birthday video")
    html = other_client.get("/").content.decode()
    assert "Video by mia" in html and "ready ≈" in html
    assert "secret birthday" not in html


def test_it_shows_shared_prompts_in_the_plan(other_client, member, device):
    make_job(member, device, prompt="a shared lighthouse", shared=True)
    assert "a shared lighthouse" in other_client.get("/").content.decode()


def test_it_lists_my_recent_jobs_only(member_client, member, other_member, device):
    mine = make_job(member, device, state="done", prompt="my fox")
    theirs = make_job(other_member, device, state="done", prompt="their owl", shared=True)
    html = member_client.get("/").content.decode()
    assert f'id="job-{mine.pk}-row"' in html and f'id="job-{theirs.pk}-row"' not in html


def test_it_tells_viewers_they_watch(viewer_client, device):
    html = viewer_client.get("/").content.decode()
    assert "You're a viewer" in html and 'href="/jobs/new/"' not in html


def test_it_invites_admins_to_add_a_device_when_there_is_none(admin_client):
    html = admin_client.get("/").content.decode()
    assert "No device yet" in html and "/devices/find/" in html


def test_it_keeps_its_query_budget(
    member_client, member, other_member, device, django_assert_max_num_queries
):
    for i in range(6):
        make_job(member, device, prompt=f"fox {i}")
        make_job(other_member, device, state="done", prompt=f"owl {i}")
    make_job(member, device, state="running")
    # Session, user, device, plan, running job, sparkline, recent jobs...: flat in the number of jobs.
    with django_assert_max_num_queries(12):
        assert member_client.get("/").status_code == 200


def test_it_redraws_the_sparkline(member_client, device):
    response = member_client.get(f"/jobs/devices/{device.pk}/sparkline/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and f'id="device-{device.pk}-spark"' in response.content.decode()


def test_it_shows_the_vaults_summary_window_in_the_plan_to_admins_only(admin_client, member_client, device):
    from devices.models import Device

    vault = {"summary_start_hour": 23, "summary_end_hour": 5, "summary_model": "Qwen/Qwen3.6-35B-A3B-turbo"}
    Device.objects.filter(pk=device.pk).update(capabilities={**device.capabilities, "vault": vault})
    html = admin_client.get("/").content.decode()
    assert "Memory summaries 23:00–05:00 with Qwen3.6-35B-A3B-turbo · renders won't unload it" in html
    assert "Memory summaries" not in member_client.get("/").content.decode()


def test_the_plan_shows_the_next_entries_then_how_many_more_wait(member_client, member, device):
    import re

    from jobs.live.fragments import PLAN_SHOWN

    jobs = [make_job(member, device, prompt=f"fox {i}") for i in range(PLAN_SHOWN + 3)]
    html = member_client.get("/").content.decode()
    plan = re.search(rf'id="device-{device.pk}-queue".*?</section>', html, re.S).group(0)
    shown = [int(pk) for pk in re.findall(r'class="plan-item" id="plan-(\d+)"', plan)]
    assert shown == [j.pk for j in jobs[:PLAN_SHOWN]]  # the next ones, in the order they will run
    more = re.search(r'<p class="plan-more">(.*?)</p>', plan, re.S).group(1)
    assert more.startswith("and 3 more waiting — ") and f'href="/jobs/queue/#q-{device.pk}"' in more
    assert "queue clear ≈" in plan  # the plan's end is the whole queue's


def test_a_short_plan_shows_every_entry_and_no_more_line(member_client, member, device):
    from jobs.live.fragments import PLAN_SHOWN

    for i in range(PLAN_SHOWN):
        make_job(member, device, prompt=f"fox {i}")
    html = member_client.get("/").content.decode()
    assert html.count('class="plan-item"') == PLAN_SHOWN and "more waiting" not in html


def test_its_queries_do_not_grow_with_the_devices(
    member_client, member, device, django_assert_max_num_queries
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from devices.models import Device
    from devices.services import device_register

    make_job(member, device, state="running")
    make_job(member, device, prompt="waits")
    with CaptureQueriesContext(connection) as one:
        assert member_client.get("/").status_code == 200
    for i in range(3):
        d = device_register(
            name=f"Pocket {i + 2}", kind="tiiny", base_url=f"http://127.0.0.{i + 2}:9", api_key="k"
        )
        Device.objects.filter(pk=d.pk).update(state=Device.State.ONLINE)
        make_job(member, d, state="running")
    # Three more devices, each running a job with nothing waiting: their plans and sparklines come with the
    # first device's reads (a plan with entries adds the read of its entries).
    with django_assert_max_num_queries(len(one.captured_queries)):
        html = member_client.get("/").content.decode()
    assert html.count('class="device-panel"') == 4


def test_the_sparklines_of_several_devices_are_each_ones_own(device):
    import datetime as dt

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from devices.models import DeviceMetric
    from devices.services import device_register
    from jobs.live.fragments import sparkline, sparklines

    other = device_register(name="Other", kind="tiiny", base_url="http://127.0.0.2:9", api_key="k")
    quiet = device_register(name="Quiet", kind="tiiny", base_url="http://127.0.0.3:9", api_key="k")
    now = timezone.now().replace(microsecond=0)
    for i in range(6):
        at = now - dt.timedelta(seconds=10 * (6 - i))
        DeviceMetric.objects.create(device=device, resolution=10, bucket=at, samples=2, npu_util_sum=20.0 * i)
        DeviceMetric.objects.create(device=other, resolution=10, bucket=at, samples=1, npu_util_sum=90.0 - i)
    since = now - dt.timedelta(hours=1)
    with CaptureQueriesContext(connection) as ctx:
        together = sparklines([device.pk, other.pk, quiet.pk], since=since, until=now)
    assert len(ctx.captured_queries) == 1
    for d in (device, other, quiet):
        assert together[d.pk] == sparkline(d.pk, since=since, until=now)
    assert together[device.pk]["last_util"] == 50 and together[other.pk]["peak_util"] == 90
    assert together[quiet.pk]["points"] == "" and together[quiet.pk]["last_util"] is None


def test_a_job_deleted_through_v1_leaves_my_recent_jobs_as_it_leaves_their_push(
    member_client, member, device
):
    from django.utils import timezone

    from jobs.live.fragments import render_my_jobs
    from jobs.models import Job

    kept = make_job(member, device, state="done", prompt="a kept fox")
    gone = make_job(member, device, state="done", prompt="a deleted owl")
    Job.objects.filter(pk=gone.pk).update(hidden_at=timezone.now())
    for html in (member_client.get("/").content.decode(), render_my_jobs(member)):
        assert f'id="job-{kept.pk}-row"' in html and f'id="job-{gone.pk}-row"' not in html
