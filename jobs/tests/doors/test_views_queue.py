from __future__ import annotations

import pytest
from django.test import Client

from hub import pagecache
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db


def test_everyone_signed_in_sees_the_queue(viewer_client, member, device):
    make_job(member, device, prompt="private fox")
    html = viewer_client.get("/jobs/queue/").content.decode()
    assert "Video by mia" in html and "private fox" not in html
    assert f"watch=queue:{device.pk}" in html and "Pause the queue" not in html
    assert Client().get("/jobs/queue/").status_code == 302


def test_admins_get_controls_with_prompts(admin_client, member, device):
    job = make_job(member, device, prompt="private fox")
    html = admin_client.get("/jobs/queue/").content.decode()
    assert "Pause the queue" in html and "private fox" in html and f'id="run-next-{job.pk}"' in html


@pytest.mark.parametrize("who", ["member_client", "viewer_client"])
def test_only_admins_control_the_queue(request, member, device, who):
    job = make_job(member, device)
    client = request.getfixturevalue(who)
    assert client.post(f"/jobs/queue/{device.pk}/pause/").status_code == 403
    assert client.post(f"/jobs/{job.pk}/run-next/").status_code == 403
    assert client.post(f"/jobs/{job.pk}/move/", {"direction": "up"}).status_code == 403
    device.refresh_from_db()
    assert not device.queue_paused


def test_admins_pause_and_resume(admin_client, device):
    html = admin_client.post(f"/jobs/queue/{device.pk}/pause/", HTTP_HX_REQUEST="true").content.decode()
    device.refresh_from_db()
    assert device.queue_paused and "Resume the queue" in html
    admin_client.post(f"/jobs/queue/{device.pk}/resume/")
    device.refresh_from_db()
    assert not device.queue_paused


def test_admins_reorder_and_run_next(admin_client, member, other_member, device):
    a = make_job(member, device, prompt="first")
    b = make_job(other_member, device, prompt="second")
    c = make_job(member, device, prompt="third")
    html = admin_client.post(f"/jobs/{c.pk}/run-next/", HTTP_HX_REQUEST="true").content.decode()
    assert html.index("third") < html.index("first")
    html = admin_client.post(
        f"/jobs/{b.pk}/move/", {"direction": "up"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert f'id="device-{device.pk}-queue-admin"' in html
    assert admin_client.post(f"/jobs/{a.pk}/move/", {"direction": "sideways"}).status_code == 400


def test_cancelling_from_the_queue_page_returns_there(admin_client, member, device):
    job = make_job(member, device)
    assert 'name="next" value="/jobs/queue/"' in admin_client.get("/jobs/queue/").content.decode()
    response = admin_client.post(f"/jobs/{job.pk}/cancel/", {"reason": "needed", "next": "/jobs/queue/"})
    assert response["Location"] == "/jobs/queue/"


def test_it_never_redirects_off_site(admin_client, member, device):
    job = make_job(member, device)
    response = admin_client.post(f"/jobs/{job.pk}/cancel/", {"next": "https://evil.example/"})
    assert response["Location"] == f"/jobs/{job.pk}/"


def test_the_plan_shows_admins_the_vaults_summary_window_and_the_devices_decision(
    admin_client, member_client, viewer_client, device
):
    from devices.models import Device

    assert "Memory summaries" not in admin_client.get("/jobs/queue/").content.decode()  # not known yet
    vault = {"summary_start_hour": 23, "summary_end_hour": 5, "summary_model": "Qwen/Qwen3.6-35B-A3B-turbo"}
    Device.objects.filter(pk=device.pk).update(capabilities={**device.capabilities, "vault": vault})
    html = admin_client.get("/jobs/queue/").content.decode()
    assert "Memory summaries 23:00–05:00 with Qwen3.6-35B-A3B-turbo · renders won't unload it" in html
    Device.objects.filter(pk=device.pk).update(may_evict_summary_model=True)
    pagecache.changed()  # what the admin's POST does (hub.pagecache.ChangesMiddleware): the page is drawn again
    assert "renders may unload it" in admin_client.get("/jobs/queue/").content.decode()
    for client in (member_client, viewer_client):  # jargon for admins: not even hidden in the page
        assert "Memory summaries" not in client.get("/jobs/queue/").content.decode()


def test_a_member_sees_their_own_entries_by_prompt_on_every_page_with_the_plan(
    member_client, other_client, member, other_member, device
):
    import re

    waiting = make_job(member, device, prompt="my quiet heron")
    make_job(other_member, device, state="running", prompt="otto's loud drums")
    for path in ("/", "/jobs/queue/", f"/jobs/new/?device={device.pk}"):
        mine = member_client.get(path).content.decode()
        entry = re.search(
            rf'<li class="plan-item" id="(?:page-)?plan-{waiting.pk}".*?</li>', mine, re.S
        ).group(0)
        assert "my quiet heron" in entry and "Video by mia" not in entry, path
        card = re.search(rf'id="device-{device.pk}-running".*?</section>', mine, re.S).group(0)
        assert "Video by otto" in card and "drums" not in mine, path
        theirs = other_client.get(path).content.decode()
        assert "heron" not in theirs and "Video by mia" in theirs, path
        assert "otto&#x27;s loud drums" in theirs, path  # their own running job, by its prompt


# -- pages of the plan ----------------------------------------------------------------------------------------
def _plan_ids(html: str, box: str) -> list[int]:
    import re

    section = re.search(rf'id="{box}".*?</section>', html, re.S).group(0)
    return [int(pk) for pk in re.findall(r'id="(?:page-plan|qa-job)-(\d+)"', section)]


@pytest.fixture
def seven(member, device, monkeypatch):
    """Seven waiting jobs, three to a page of the queue page."""
    from jobs.live import fragments

    monkeypatch.setattr(fragments, "QUEUE_PAGE_SIZE", 3)
    return [make_job(member, device, prompt=f"kite {i}") for i in range(7)]


def test_the_queue_page_pages_the_plan(viewer_client, device, seven):
    box = f"device-{device.pk}-queue-page"
    first = viewer_client.get("/jobs/queue/").content.decode()
    assert _plan_ids(first, box) == [j.pk for j in seven[:3]]
    assert f'href="/jobs/queue/?device={device.pk}&amp;page=2#q-{device.pk}">Later →' in first
    assert 'rel="prev"' not in first and "1–3 of 7 waiting · page 1 of 3" in first
    assert f"watch=queue:{device.pk}" in first  # the first page follows the queue live
    second = viewer_client.get(f"/jobs/queue/?device={device.pk}&page=2").content.decode()
    assert _plan_ids(second, box) == [j.pk for j in seven[3:6]]
    assert '<ol class="plan-list" start="4">' in second and 'rel="prev"' in second and 'rel="next"' in second
    assert "ws-connect" not in second and "doesn't follow the queue live" in second  # pushes carry page 1
    for far in ("99", "0", "-1", "two", "1e3"):  # out of range or not a number: the nearest page
        html = viewer_client.get(f"/jobs/queue/?device={device.pk}&page={far}").content.decode()
        assert _plan_ids(html, box) == ([seven[6].pk] if far == "99" else [j.pk for j in seven[:3]]), far


def test_the_queue_page_asks_for_its_list_again_when_the_plan_is_pushed(viewer_client, device, seven):
    """The pushed plan (the dashboard's glance) lands in a hidden element whose arrival re-fetches the list."""
    html = viewer_client.get("/jobs/queue/").content.decode()
    assert f'<section class="plan" id="device-{device.pk}-queue" aria-hidden="true"></section>' in html
    assert f'hx-get="/jobs/queue/?device={device.pk}" hx-trigger="htmx:oobAfterSwap' in html
    answer = viewer_client.get(f"/jobs/queue/?device={device.pk}", HTTP_HX_REQUEST="true").content.decode()
    assert answer.lstrip().startswith(f'<section class="plan" id="device-{device.pk}-queue-page"')
    assert "<html" not in answer and "hx-swap-oob" not in answer
    assert _plan_ids(answer, f"device-{device.pk}-queue-page") == [j.pk for j in seven[:3]]
    assert viewer_client.get("/jobs/queue/?device=999999", HTTP_HX_REQUEST="true").status_code == 404


def test_admins_controls_work_on_the_page_shown(admin_client, device, seven):
    import re

    box = f"device-{device.pk}-queue-admin"
    html = admin_client.get(f"/jobs/queue/?device={device.pk}&page=2").content.decode()
    controls = re.search(rf'id="{box}".*?</section>', html, re.S).group(0)
    assert _plan_ids(html, box) == [j.pk for j in seven[3:6]]
    assert controls.count('name="page" value="2"') == 1 + 3 * 3  # pause, and up/down/run next per entry
    assert "disabled" not in controls  # the top of page 2 may move up (onto page 1), its bottom down
    assert f'name="next" value="/jobs/queue/?device={device.pk}&amp;page=2"' in controls
    up = admin_client.post(
        f"/jobs/{seven[3].pk}/move/", {"direction": "up", "page": "2"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert _plan_ids(up, box) == [seven[2].pk, seven[4].pk, seven[5].pk]  # the same page, the new order
    plain = admin_client.post(f"/jobs/{seven[4].pk}/run-next/", {"page": "2"})
    assert plain["Location"] == f"/jobs/queue/?device={device.pk}&page=2#q-{device.pk}"
    last = admin_client.get(f"/jobs/queue/?device={device.pk}&page=3").content.decode()
    buttons = re.findall(
        r"<button[^>]*icon-button[^>]*>", re.search(rf'id="{box}".*?</section>', last, re.S).group(0)
    )
    assert (
        len(buttons) == 2 and "disabled" not in buttons[0] and "disabled" in buttons[1]
    )  # last of all: no down
    first = admin_client.get("/jobs/queue/").content.decode()
    buttons = re.findall(
        r"<button[^>]*icon-button[^>]*>", re.search(rf'id="{box}".*?</section>', first, re.S).group(0)
    )
    assert "disabled" in buttons[0] and "disabled" not in "".join(buttons[1:])  # first of all: no up


def test_the_admins_folded_plan_is_the_dashboards_glance(admin_client, member, device):
    from jobs.live.fragments import PLAN_SHOWN

    for i in range(PLAN_SHOWN + 2):
        make_job(member, device, prompt=f"owl {i}")
    html = admin_client.get("/jobs/queue/").content.decode()
    folded = html[html.index(f'id="q-{device.pk}-public"') :]
    assert folded.count('class="plan-item" id="plan-') == PLAN_SHOWN and "and 2 more waiting" in folded


def test_the_lists_answer_follows_the_same_rules_as_the_page(viewer_client, admin_client, member, device):
    make_job(member, device, prompt="private fox")
    path, htmx = f"/jobs/queue/?device={device.pk}", {"HTTP_HX_REQUEST": "true"}
    theirs = viewer_client.get(path, **htmx).content.decode()
    assert "Video by mia" in theirs and "private fox" not in theirs
    assert "private fox" in admin_client.get(path, **htmx).content.decode()
    assert Client().get(path, **htmx).status_code == 302  # signed out: the sign-in page, nothing else


def test_the_pages_plan_reads_the_same_order_and_reasons_as_the_full_plan(member, other_member, device):
    """The pages order the waiting jobs from a few columns each (``waiting_plan_rows``) and read in full only the
    entries they draw: the same order, reasons and predictions as ``queue_plan``."""
    import datetime as dt

    from django.utils import timezone

    from jobs.core.selectors import queue_plan
    from jobs.live.fragments import queue_context
    from jobs.models import Job

    jobs = [make_job(owner, device, prompt=f"job {i}") for i, owner in enumerate([member, other_member] * 5)]
    # The member has used the device this week: fair share moves their jobs back.
    done = make_job(member, device, prompt="done")
    Job.objects.filter(pk=done.pk).update(state="done", device_seconds=600, finished_at=timezone.now())
    Job.objects.filter(pk=jobs[3].pk).update(
        when="not_before", not_before=timezone.now() + dt.timedelta(hours=2)
    )
    Job.objects.filter(pk=jobs[7].pk).update(priority=3)
    full = queue_plan(device)
    ctx = queue_context(device, page=1)
    assert [(e.job.pk, e.job.plan_reason, e.finish) for e in ctx["entries"]] == [
        (j.pk, j.plan_reason, j.predicted_finish) for j in full
    ]
    assert ctx["entries"][0].job.pk == jobs[7].pk and ctx["waiting"] == len(full) == 10
    assert any(j.plan_reason.startswith("fair share") for j in full)


def test_the_pages_plan_orders_a_pool_lane_as_its_device_will_run_it(member, device, kitchen):
    """In a lane of the pool, the longest job whose model the device holds goes first (``scheduler.pick``): the
    pages read the columns that rule needs too, so they show the order the device will really run."""
    from jobs.core.scheduler import next_job, snapshot_for
    from jobs.core.selectors import queue_plan, waiting_on
    from jobs.live.fragments import queue_context

    pool = sorted([device.pk, kitchen.pk])
    jobs = [
        make_job(member, device, pinned=False, pool=pool, estimate_s=s, prompt=f"job {i}")
        for i, s in enumerate([10, 600, 5, 900])
    ]
    first, _jumped = next_job(snapshot_for(device.pk), waiting_on(device.pk))
    assert first.pk == jobs[3].pk  # the longest within reach (k + 1 = 4 jobs: all of them)
    full = queue_plan(device)
    ctx = queue_context(device, page=1)
    assert [e.job.pk for e in ctx["entries"]] == [j.pk for j in full] == [jobs[i].pk for i in (3, 1, 0, 2)]
    assert (
        ctx["entries"][0].job.plan_reason
        == "runs first: a long render early, so that short ones end the night"
    )


def test_the_queue_pages_queries_do_not_grow_with_the_queue(viewer_client, member, other_member, device):
    """The plan is read once per device (the order from a few columns, the entries drawn in one more query):
    twelve waiting jobs cost the queries three do."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert viewer_client.get("/jobs/queue/").status_code == 200
        return len(ctx.captured_queries)

    for owner in (member, other_member, member):
        make_job(owner, device)
    few = count()
    for i in range(9):
        make_job(other_member if i % 2 else member, device, prompt=f"fox {i}")
    assert count() == few
