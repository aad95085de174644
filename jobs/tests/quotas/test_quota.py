"""Quotas: refused at submit time by admission, in the same words through the form, REST and /v1 (the real
``openai`` SDK included), lifted by an admin for one job, and the numbers behind them."""

from __future__ import annotations

import contextlib
import datetime as dt
import html

import httpx
import openai
import pytest
from django.test import Client

from jobs.models import DeviceUse, Job, PersonQuota
from jobs.quotas import services as quotas
from jobs.tests.ui_fixtures import VIDEO, add_artifact, make_job

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

FIELDS = {"size": "832x480", "seconds": 2, "steps": 4}


@pytest.fixture(autouse=True)
def _no_rate_limit(settings):
    settings.HUB_API_SUBMIT_RATE = "0"


def bearer(user, scopes=("read", "submit")) -> Client:
    from hub.accounts.tokens import token_create

    raw = token_create(user=user, name="doors", scopes=list(scopes))[1]
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


@contextlib.contextmanager
def sdk_for(user):
    """The real SDK, unchanged, speaking HTTP to the hub in this process (WSGI), so it sees this test's rows.
    Like Django's test client, the request signals must not close the test's database connection."""
    from django.core.handlers.wsgi import WSGIHandler
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    from hub.accounts.tokens import token_create

    raw = token_create(user=user, name="sdk", scopes=["read", "submit"])[1]
    transport = httpx.WSGITransport(app=WSGIHandler())  # not get_wsgi_application(): its django.setup() would
    # configure logging again, dropping the handlers the test run added (hub.tests.leakguard's log scanner)
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        with openai.OpenAI(
            base_url="http://127.0.0.1/v1",
            api_key=raw,
            max_retries=0,
            http_client=httpx.Client(transport=transport, base_url="http://127.0.0.1"),
        ) as sdk:
            yield sdk
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def estimate_of(device) -> float:
    from jobs.queue import eta

    params = {"prompt": "fox", **FIELDS}
    return eta.estimate(device_id=device.pk, device_kind="tiiny", kind="video", model_id=VIDEO, params=params)


def set_limits(by, user=None, **values):
    return quotas.quota_set(by=by, user=user, **values)


def page_post(client, device, **extra):
    data = {"device": device.pk, "kind": "video", "model": VIDEO, "prompt": "fox", "when": "asap", **FIELDS}
    return client.post("/jobs/new/", {**data, **extra})


def rest_post(client, device, **extra):
    body = {"device": device.pk, "kind": "video", "model": VIDEO, "prompt": "fox", **FIELDS, **extra}
    return client.post("/api/jobs", body, content_type="application/json")


def rest_words(response) -> str:
    body = response.json()
    return " ".join([body["detail"], *(m for ms in (body.get("errors") or {}).values() for m in ms)])


def v1_post(client, **extra):
    body = {"model": VIDEO, "prompt": "fox", "size": "832x480", "seconds": "2", "steps": 4, **extra}
    return client.post("/v1/videos", body, content_type="application/json")


# -- the three doors, one refusal ----------------------------------------------------------------------------
def test_every_door_refuses_over_the_daily_limit_with_the_same_words(
    admin_user, member, member_client, device
):
    est = estimate_of(device)
    minutes = round(est / 60)
    # One job already queued books its estimate; with the new one, twice that is over a limit of 1.5 times it.
    make_job(member, device, state="queued", estimate_s=est)
    limit = int(minutes * 1.5)
    set_limits(admin_user, device_minutes_per_day=limit)
    words = (
        f"Daily device time: {minutes} of {limit} minutes used today (0 run, {minutes} booked by your jobs in "
        f"the queue); this job needs about {minutes} more"
    )
    page = page_post(member_client, device)
    assert page.status_code == 400
    assert words in html.unescape(page.content.decode())
    rest = rest_post(bearer(member), device)
    assert rest.status_code == 422, rest.content
    assert words in rest_words(rest)
    v1 = v1_post(bearer(member))
    assert v1.status_code == 400, v1.content
    assert words in v1.json()["error"]["message"] and v1.json()["error"]["param"] is None
    with sdk_for(member) as sdk, pytest.raises(openai.BadRequestError) as refused:
        sdk.videos.create(model=VIDEO, prompt="fox", size="832x480", seconds="2", extra_body={"steps": 4})
    assert words in refused.value.message
    assert Job.objects.count() == 1  # only the one made above


def test_the_refusal_says_when_it_frees_up(admin_user, member, device):
    est = estimate_of(device)
    set_limits(admin_user, device_minutes_per_day=round(est / 60) + 2)
    now = dt.datetime(2026, 12, 1, 21, 30, tzinfo=dt.UTC)
    DeviceUse.objects.create(
        owner=member, device=device, started=now - dt.timedelta(minutes=5), ended=now, seconds=300
    )
    verdict = quotas.quota_check(owner=member, estimate_s=est, now=now)
    assert verdict.refused.startswith(f"Daily device time: 5 of {round(est / 60) + 2} minutes used today;")
    assert verdict.refused.endswith("frees up at 00:00.")  # the household day (UTC here) ends at midnight
    # The next day the same request passes: yesterday's minutes are yesterday's.
    assert quotas.quota_check(owner=member, estimate_s=est, now=now + dt.timedelta(hours=3)).refused is None


def test_a_span_over_midnight_counts_on_each_day_for_its_part(admin_user, member, device):
    set_limits(admin_user, device_minutes_per_day=10, device_minutes_per_week=1000)
    midnight = dt.datetime(2026, 12, 2, 0, 0, tzinfo=dt.UTC)  # a Wednesday
    DeviceUse.objects.create(
        owner=member,
        device=device,
        started=midnight - dt.timedelta(minutes=20),
        ended=midnight + dt.timedelta(minutes=8),
        seconds=28 * 60,
    )
    use = quotas.usage_for(member, now=midnight + dt.timedelta(minutes=30))
    assert (round(use.day_s), round(use.week_s)) == (8 * 60, 28 * 60)
    days = quotas.usage_days(user=member, days=2, now=midnight + dt.timedelta(minutes=30))
    assert [round(d.device_s) for d in days] == [20 * 60, 8 * 60]
    verdict = quotas.quota_check(owner=member, estimate_s=3 * 60, now=midnight + dt.timedelta(minutes=30))
    assert verdict.refused.startswith("Daily device time: 8 of 10 minutes used today; this job needs about 3")


def test_the_weekly_limit_frees_up_on_monday(admin_user, member, device):
    set_limits(admin_user, device_minutes_per_week=60)
    wed = dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC)
    DeviceUse.objects.create(
        owner=member, device=device, started=wed - dt.timedelta(hours=1), ended=wed, seconds=3600
    )
    verdict = quotas.quota_check(owner=member, estimate_s=60, now=wed)
    assert verdict.refused == (
        "Weekly device time: 60 of 60 minutes used this week; this job needs about 1 more; "
        "frees up on Monday 7 Dec at 00:00."
    )


def test_a_job_bigger_than_the_whole_limit_says_so(admin_user, member, device):
    set_limits(admin_user, device_minutes_per_day=3)
    verdict = quotas.quota_check(owner=member, estimate_s=600, now=dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC))
    assert "this job needs about 10 more, more than the whole limit" in verdict.refused
    assert "ask an admin to lift the limit" in verdict.refused


def test_it_refuses_a_job_over_the_queue_limit_and_over_storage(
    admin_user, member, member_client, device, media
):
    set_limits(admin_user, max_queued=2)
    make_job(member, device, state="queued")
    make_job(member, device, state="running")
    page = page_post(member_client, device)
    assert page.status_code == 400
    assert "Jobs in the queue: 2 of 2 (waiting or running); frees up when one of them ends" in html.unescape(
        page.content.decode()
    )
    set_limits(admin_user, max_queued=None, storage_mb=1)
    Job.objects.filter(owner=member).update(state="done")
    add_artifact(Job.objects.filter(owner=member).first(), media, data=b"x" * (quotas.MB + 10))
    rest = rest_post(bearer(member), device)
    assert rest.status_code == 422
    assert "Storage for results: 1 of 1 MB used; frees up when you delete results" in rest_words(rest)


def test_a_personal_override_beats_the_household_default(admin_user, member, other_member, device):
    set_limits(admin_user, max_queued=0)
    set_limits(admin_user, user=member, max_queued=quotas.UNLIMITED)
    assert quotas.limits_for(member).max_queued is None
    assert quotas.limits_for(other_member).max_queued == 0
    assert rest_post(bearer(member), device).status_code == 201
    assert rest_post(bearer(other_member), device).status_code == 422
    set_limits(admin_user, user=member, max_queued=None)  # back to the default: the row goes
    assert not PersonQuota.objects.filter(user=member).exists()
    assert rest_post(bearer(member), device).status_code == 422


# -- lifting a limit for one job -------------------------------------------------------------------------------
def test_admins_are_held_to_limits_but_may_lift_them_for_one_job_on_the_form(
    admin_user, admin_client, device
):
    set_limits(admin_user, max_queued=0)
    refused = page_post(admin_client, device)
    assert refused.status_code == 400
    page = html.unescape(refused.content.decode())
    assert "Jobs in the queue: 0 of 0" in page
    assert "As an admin you may lift it for this job" in page
    assert 'name="lift_limits"' in page and "Lift my limits for this job" in page
    queued = page_post(admin_client, device, lift_limits="on")
    assert queued.status_code == 302, queued.content
    job = Job.objects.get()
    story = list(job.events.order_by("seq").values_list("message", "data"))
    assert story[1][0].startswith("Limit lifted for this job by ada: Jobs in the queue: 0 of 0")
    assert story[1][1]["quota_lifted"][0].startswith("Jobs in the queue")


def test_members_get_no_lift_box_and_a_posted_one_does_nothing(admin_user, member_client, device):
    set_limits(admin_user, max_queued=0)
    page = member_client.get(f"/jobs/new/?device={device.pk}&kind=video")
    assert 'name="lift_limits"' not in page.content.decode()
    assert page_post(member_client, device, lift_limits="on").status_code == 400
    assert Job.objects.count() == 0


def test_rest_and_v1_lift_for_an_admin_token_only(admin_user, member, device):
    set_limits(admin_user, max_queued=0)
    admin_api, member_api = bearer(admin_user), bearer(member)
    assert rest_post(admin_api, device).status_code == 422
    lifted = rest_post(admin_api, device, lift_limits=True)
    assert lifted.status_code == 201, lifted.content
    assert any("lifted for this job" in w for w in lifted.json()["warnings"])
    refused = rest_post(member_api, device, lift_limits=True)
    assert refused.status_code == 422
    assert refused.json()["errors"] == {"lift_limits": ["Only an admin can lift a limit for one job."]}
    v1 = v1_post(member_api, lift_limits=True)
    assert v1.status_code == 400 and v1.json()["error"]["param"] == "lift_limits"
    assert v1_post(admin_api, lift_limits=True).status_code == 200
    with sdk_for(admin_user) as sdk:
        video = sdk.videos.create(
            model=VIDEO, prompt="fox", size="832x480", seconds="2", extra_body={"lift_limits": True}
        )
    job = Job.objects.get(pk=int(video.id.removeprefix("video_")))
    assert job.events.filter(message__startswith="Limit lifted for this job by ada").exists()
    with sdk_for(member) as sdk, pytest.raises(openai.BadRequestError) as refused_sdk:
        sdk.videos.create(
            model=VIDEO, prompt="fox", size="832x480", seconds="2", extra_body={"lift_limits": True}
        )
    assert "Only an admin can lift a limit" in refused_sdk.value.message
    assert Job.objects.filter(owner=member).count() == 0
    assert Job.objects.filter(owner=admin_user).count() == 3


# -- where a member sees it --------------------------------------------------------------------------------------
@pytest.mark.usefixtures("midday")  # 12 minutes "today", at any hour
def test_the_new_job_form_shows_todays_usage_against_the_limit(admin_user, member, member_client, device):
    set_limits(admin_user, device_minutes_per_day=60, max_queued=5)
    now = quotas.timezone.now()
    DeviceUse.objects.create(
        owner=member, device=device, started=now - dt.timedelta(minutes=12), ended=now, seconds=0
    )
    expected = 12
    summary = member_client.post(
        "/jobs/new/admission/",
        {"device": device.pk, "kind": "video", "model": VIDEO, "prompt": "fox", "when": "asap", **FIELDS},
    )
    text = html.unescape(summary.content.decode())
    assert f"Today {expected} of 60 device minutes · 0 of 5 jobs in the queue" in text
    assert 'href="/usage/"' in text


def test_no_limits_no_line(member_client, device):
    summary = member_client.post(
        "/jobs/new/admission/",
        {"device": device.pk, "kind": "video", "model": VIDEO, "prompt": "fox", "when": "asap", **FIELDS},
    )
    assert summary.status_code == 200 and 'id="quota-usage"' not in summary.content.decode()


# -- the People page -------------------------------------------------------------------------------------------
def test_admins_set_defaults_and_overrides_in_the_people_page(admin_client, admin_user, member):
    page = admin_client.get("/accounts/people/")
    assert page.status_code == 200
    text = page.content.decode()
    assert (
        'id="quotas"' in text
        and 'action="/usage/limits/"' in text
        and f'id="quota-person-{member.pk}"' in text
    )
    saved = admin_client.post(
        "/usage/limits/",
        {"device_minutes_per_day": "60", "device_minutes_per_week": "", "max_queued": "3", "storage_mb": ""},
    )
    assert saved.status_code == 302
    assert quotas.household_limits() == quotas.Limits(device_minutes_per_day=60, max_queued=3)
    admin_client.post(f"/usage/limits/{member.pk}/", {"device_minutes_per_day": "none", "max_queued": "10"})
    limits = quotas.limits_for(member)
    assert (limits.device_minutes_per_day, limits.max_queued) == (None, 10)
    assert limits.overridden == {"device_minutes_per_day", "max_queued"}
    again = admin_client.get("/accounts/people/").content.decode()
    assert 'value="none"' in again and "0 of 10 jobs in the queue" in again


def test_a_bad_limit_is_named_and_changes_nothing(admin_client, admin_user, member):
    response = admin_client.post(f"/usage/limits/{member.pk}/", {"max_queued": "lots", "storage_mb": "5"})
    assert response.status_code == 302
    follow = admin_client.get(response["Location"]).content.decode()
    assert "Jobs in the queue of mia: Give a whole number of 0 or more" in html.unescape(follow)
    assert not PersonQuota.objects.exists()


def test_only_admins_set_limits(member_client, member):
    assert member_client.post("/usage/limits/", {"max_queued": "0"}).status_code == 403
    assert member_client.post(f"/usage/limits/{member.pk}/", {"max_queued": "99"}).status_code == 403
    assert quotas.household_limits() == quotas.Limits()


def test_the_people_page_reads_everyones_quota_at_once_and_each_gets_their_own(
    admin_client, admin_user, member, other_member, device, media
):
    """The quota section costs the same queries for 3 people as for 8, and the batched reads give each person
    their own limits, queue and storage (not a neighbour's)."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    set_limits(admin_user, max_queued=5)
    set_limits(admin_user, other_member, max_queued=9)
    make_job(member, device, state="queued")
    make_job(member, device, state="queued")
    add_artifact(make_job(other_member, device, state="done"), media, name="a.mp4", data=b"x" * 2048)

    def people_page() -> tuple[int, str]:
        with CaptureQueriesContext(connection) as ctx:
            text = admin_client.get("/accounts/people/").content.decode()
        return len(ctx.captured_queries), text

    few, text = people_page()
    assert "2 of 5 jobs in the queue" in text and "0 of 9 jobs in the queue" in text
    for i in range(5):
        get_user_model().objects.create_user(username=f"extra{i}", password="pw-extra-12345")
    many, _ = people_page()
    assert many == few
    usage = quotas.usage_of_many([member.pk, other_member.pk])
    assert (usage[member.pk].queued, usage[member.pk].storage_bytes) == (2, 0)
    assert (usage[other_member.pk].queued, usage[other_member.pk].storage_bytes) == (0, 2048)
