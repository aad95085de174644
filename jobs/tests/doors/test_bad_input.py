"""No 500 on bad input in the job pages, class by class (issue 10): numbers from the request, stored and typed
dates, double submits, unknown values, and status codes; then a small property-based run over the submit form
and the gallery.

Every test here failed on the code before the fix (a 500, a second job, a silent fallback or a 200)."""

from __future__ import annotations

import base64
import datetime as dt
import os
import re

import pytest
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from devices.models import Device
from jobs.models import Job
from jobs.queue import services
from jobs.queue.admission import MAX_NOT_BEFORE
from jobs.queue.eta import PLAN_HORIZON, plan
from jobs.tests.ui_fixtures import VIDEO, make_job

pytestmark = pytest.mark.django_db

# A small run in ``make test`` (a few seconds); ``HUB_FUZZ_PROFILE=bad-input-long`` for a longer one.
# No shrinking in the small run: a failure reports the first example found, well inside pytest's timeout.
settings.register_profile(
    "bad-input",
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.generate),
)
settings.register_profile("bad-input-long", max_examples=2000, deadline=None, database=None)
FUZZ = settings.get_profile(os.environ.get("HUB_FUZZ_PROFILE", "bad-input"))

# "²".isdigit() is true but int("²") raises; 10,000 digits pass isdigit() and make int() raise; 25 digits
# pass int() but not a 64-bit column; the rest are what people and scripts send.
BAD_NUMBERS = ["²", "١٢", "9" * 10_000, "9" * 25, "-1", "1e3", "abc", " ", " 1"]


def video_post(on, **over):
    data = {
        "device": on.pk,
        "kind": "video",
        "model": VIDEO,
        "prompt": "a fox in the snow",
        "size": "832x480",
        "seconds": "2",
        "steps": "4",
        "when": "asap",
        "polite": "on",
    }
    data.update(over)
    return data


def quiet_client(user) -> Client:
    """A client that answers as the server would (a 500 page) instead of raising the view's exception."""
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def token_of(html: str) -> str:
    match = re.search(r'name="submit_token" value="([^"]+)"', html)
    assert match, "the submit form carries no idempotency token"
    return match.group(1)


# -- numbers from the request ---------------------------------------------------------------------------------
@pytest.mark.parametrize("value", BAD_NUMBERS, ids=lambda v: repr(v)[:12])
def test_a_bad_device_id_is_named_and_the_page_offers_the_devices(member, device, value):
    response = quiet_client(member).get("/jobs/new/", {"device": value, "kind": "video"})
    html = response.content.decode()
    assert response.status_code == 400
    assert "No such device" in html
    assert f'<option value="{device.pk}"' in html or "Video on Pocket" in html  # the valid choice is offered
    assert 'href="/jobs/new/?device=' in html and "kind=speech" in html  # and the kinds it can run


@pytest.mark.parametrize("value", BAD_NUMBERS, ids=lambda v: repr(v)[:12])
def test_a_post_with_a_bad_device_id_queues_nothing(member, device, value):
    response = quiet_client(member).post("/jobs/new/", video_post(device, device=value))
    assert response.status_code == 400
    assert "No such device" in response.content.decode()
    assert not Job.objects.exists()


def test_an_id_of_no_device_is_not_the_default_device(member_client, device):
    response = member_client.post("/jobs/new/", video_post(device, device=device.pk + 1000))
    html = response.content.decode()
    assert response.status_code == 400 and "No such device “" in html
    assert "a fox in the snow" in html  # what was typed is still there
    assert not Job.objects.exists()


def test_the_gallery_ignores_a_bad_device_filter(member_client, member, device):
    make_job(member, device, state="done", prompt="still here")
    for value in BAD_NUMBERS:
        response = member_client.get("/jobs/", {"device": value})
        assert response.status_code == 200 and "still here" in response.content.decode()


# -- unknown values -------------------------------------------------------------------------------------------
def test_an_unknown_kind_is_named_on_the_page_with_the_kinds_offered(member_client, device):
    response = member_client.get("/jobs/new/", {"device": device.pk, "kind": "bogus"})
    html = response.content.decode()
    assert response.status_code == 400
    assert "Unknown kind “bogus”" in html
    for kind in ("video", "mesh", "music", "image", "speech"):
        assert f"kind={kind}" in html


def test_a_post_of_an_unknown_kind_queues_nothing_and_says_why(member_client, device):
    response = member_client.post("/jobs/new/", video_post(device, kind="bogus"))
    html = response.content.decode()
    assert response.status_code == 400
    assert "Unknown kind “bogus”" in html
    assert "This field is required" not in html  # not the video form's confusing errors
    assert not Job.objects.exists()


def test_the_summary_says_unknown_kind_too(member_client, device):
    response = member_client.post(
        "/jobs/new/admission/", video_post(device, kind="bogus"), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 400 and "Unknown kind “bogus”" in response.content.decode()


def test_a_kind_the_device_cannot_run(member_client, device):
    ts = Device.objects.create(name="TensorSharp", kind="tensorsharp", base_url="http://127.0.0.1:9")
    # Switching devices keeps the kind in the URL: on a GET the page quietly shows what this device can do...
    assert member_client.get("/jobs/new/", {"device": ts.pk, "kind": "speech"}).status_code == 200
    # ...but a POST that asks for it is refused, not queued as something else.
    response = member_client.post("/jobs/new/", video_post(ts, kind="speech"))
    assert response.status_code == 400 and "run speech jobs right now" in response.content.decode()
    assert not Job.objects.exists()


# -- dates -----------------------------------------------------------------------------------------------------
FAR = dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.UTC)


@pytest.fixture
def job_in_9999(other_member, device):
    job = make_job(other_member, device, state="scheduled", prompt="see you in 9999")
    Job.objects.filter(pk=job.pk).update(when="not_before", not_before=FAR, estimate_s=1e300)
    return job


def test_a_job_waiting_for_the_year_9999_breaks_nobody_elses_submission(member, device, job_in_9999):
    client = quiet_client(member)
    summary = client.post("/jobs/new/admission/", video_post(device), HTTP_HX_REQUEST="true")
    assert summary.status_code == 200 and "ready ≈" in summary.content.decode()
    response = client.post("/jobs/new/", video_post(device))
    assert response.status_code == 302
    assert Job.objects.filter(owner=member).count() == 1
    for page in ("/jobs/new/", "/jobs/queue/", "/"):
        assert client.get(page).status_code == 200, page


def test_the_plan_puts_a_far_job_at_its_horizon(device, job_in_9999, member):
    make_job(member, device, state="queued")
    now = timezone.now()
    rows = {job.pk: (start, finish) for job, start, finish in plan(device.pk, now=now)}
    start, finish = rows[job_in_9999.pk]
    assert start == finish == now + PLAN_HORIZON
    assert all(s <= f <= now + PLAN_HORIZON for s, f in rows.values())


def test_a_not_before_past_30_days_is_refused_on_the_form(member_client, device):
    later = (timezone.localtime() + MAX_NOT_BEFORE + dt.timedelta(days=10)).strftime("%Y-%m-%d %H:%M")
    for value in (later, "9999-12-31 23:59"):
        data = video_post(device, when="not_before", not_before=value)
        response = member_client.post("/jobs/new/", data)
        html = response.content.decode()
        assert response.status_code == 400, value
        assert "Choose a time within the next 30 days." in html
        assert re.search(
            r'id="not-before-box".*Choose a time within the next 30 days', html, re.S
        )  # at the field
        summary = member_client.post("/jobs/new/admission/", data, HTTP_HX_REQUEST="true").content.decode()
        assert (
            "Choose a time within the next 30 days." in summary and "Too long for the device" not in summary
        )
    assert not Job.objects.exists()


def _cursor(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        _cursor("9999-12-31T23:59:59-05:00|1"),  # overflows when converted to UTC
        _cursor("0001-01-01T00:00:00+05:00|1"),
        _cursor("9999-12-31T23:59:59|1"),
        _cursor("2026-01-01T00:00:00+00:00|" + "9" * 30),
        _cursor("2026-01-01T00:00:00+00:00|²"),
        _cursor("2026-13-45T99:99:99|1"),
        "!!!not base64!!!",
        "A" * 5000,
        _cursor("\u00e9t\u00e9|1"),
    ],
    ids=lambda c: c[:16],
)
def test_a_strange_cursor_shows_the_first_page(member, device, cursor):
    make_job(member, device, state="done", prompt="first page card")
    for htmx in ({}, {"HTTP_HX_REQUEST": "true"}):
        response = quiet_client(member).get("/jobs/", {"cursor": cursor}, **htmx)
        assert response.status_code == 200
        assert "first page card" in response.content.decode()


# -- double submit ---------------------------------------------------------------------------------------------
def test_the_same_form_posted_twice_queues_one_job_and_shows_it(member_client, member, device):
    token = token_of(member_client.get("/jobs/new/").content.decode())
    first = member_client.post("/jobs/new/", video_post(device, submit_token=token))
    second = member_client.post("/jobs/new/", video_post(device, submit_token=token), follow=True)
    job = Job.objects.get()
    assert first.status_code == 302 and first["Location"] == f"/jobs/{job.pk}/"
    assert second.redirect_chain == [(f"/jobs/{job.pk}/", 302)]
    assert "This form was already sent" in second.content.decode()


def test_each_rendering_of_the_form_is_a_new_token(member_client, device):
    tokens = {token_of(member_client.get("/jobs/new/").content.decode()) for _ in range(3)}
    assert len(tokens) == 3
    for token in tokens:
        assert member_client.post("/jobs/new/", video_post(device, submit_token=token)).status_code == 302
    assert Job.objects.count() == 3


def test_a_form_with_errors_keeps_its_token_and_queues_once_fixed(member_client, device):
    token = token_of(member_client.get("/jobs/new/").content.decode())
    bad = member_client.post("/jobs/new/", video_post(device, seconds="9", submit_token=token))
    assert bad.status_code == 400 and token_of(bad.content.decode()) == token
    assert member_client.post("/jobs/new/", video_post(device, submit_token=token)).status_code == 302
    assert Job.objects.count() == 1


def test_a_race_on_the_same_token_makes_one_job(member, device, monkeypatch):
    """Both requests look first and find nothing; the unique column decides and the loser gets the winner."""
    first = services.job_submit(
        owner=member, device=device, kind="video", model_id=VIDEO, params={"prompt": "x", "size": "832x480",
        "seconds": 2, "steps": 4}, idempotency_key="k" * 20,
    )  # fmt: skip
    monkeypatch.setattr(services, "job_already_submitted", _misses_once(services.job_already_submitted))
    second = services.job_submit(
        owner=member, device=device, kind="video", model_id=VIDEO, params={"prompt": "x", "size": "832x480",
        "seconds": 2, "steps": 4}, idempotency_key="k" * 20,
    )  # fmt: skip
    assert second.pk == first.pk and second.idempotent_replay
    assert Job.objects.count() == 1


def _misses_once(real):
    calls = []

    def lookup(**kw):
        calls.append(kw)
        return None if len(calls) == 1 else real(**kw)

    return lookup


def test_a_token_belongs_to_its_owner(member, other_member, device):
    params = {"prompt": "x", "size": "832x480", "seconds": 2, "steps": 4}
    mine = services.job_submit(
        owner=member, device=device, kind="video", model_id=VIDEO, params=params, idempotency_key="same-key-1"
    )
    theirs = services.job_submit(
        owner=other_member,
        device=device,
        kind="video",
        model_id=VIDEO,
        params=params,
        idempotency_key="same-key-1",
    )
    assert mine.pk != theirs.pk and theirs.owner == other_member


def test_run_again_is_idempotent_too(member_client, member, device):
    job = make_job(member, device, state="done")
    html = member_client.get(f"/jobs/{job.pk}/again/").content.decode()
    data = video_post(device, submit_token=token_of(html))
    member_client.post(f"/jobs/{job.pk}/again/", data)
    member_client.post(f"/jobs/{job.pk}/again/", data)
    assert Job.objects.count() == 2  # the original and one run again


# -- status codes ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("htmx", [False, True])
def test_an_invalid_form_answers_400_with_the_form(member_client, device, htmx):
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = member_client.post("/jobs/new/", video_post(device, seconds="9"), **headers)
    assert response.status_code == 400 and response["Content-Type"].startswith("text/html")
    assert 'id="job-form"' in response.content.decode()


# -- property-based: random text and integers never give a 5xx, never queue invalid input -----------------------
NASTY = st.sampled_from(
    [
        "²",
        "١٢",
        "9" * 5000,
        "9" * 25,
        "1e3",
        "-1",
        "0",
        "",
        " ",
        "NaN",
        "inf",
        "9999-12-31 23:59",
        "0001-01-01",
    ]
)
TEXT = st.one_of(NASTY, st.text(max_size=30), st.integers(min_value=-(10**30), max_value=10**30).map(str))
SUBMIT_FIELDS = [
    "device",
    "kind",
    "model",
    "size",
    "seconds",
    "steps",
    "when",
    "not_before",
    "seed",
    "submit_token",
]


@settings(FUZZ, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.dictionaries(st.sampled_from(SUBMIT_FIELDS), TEXT, max_size=4))
def test_fuzz_the_submit_form(member, device, data):
    """Random values over a valid post: a job only when every value was valid, else a 4xx and no job."""
    before = Job.objects.count()
    response = quiet_client(member).post("/jobs/new/", video_post(device, **data))
    assert response.status_code < 500, (data, response.status_code)
    if response.status_code != 302:
        assert Job.objects.count() == before, (data, response.status_code)
        return
    job = Job.objects.latest("id")
    # Whatever was posted for the device and the kind is what was queued: nothing falls back silently.
    assert data.get("device", str(device.pk)) == str(job.device_id) and data.get("kind", "video") == job.kind
    assert job.model_id == VIDEO and job.params["size"] in {"1344x768", "768x1344", "832x480", "480x832"}
    assert 1 <= int(job.params["seconds"]) <= 7 and 4 <= int(job.params["steps"]) <= 8
    if job.not_before:
        assert job.not_before <= timezone.now() + MAX_NOT_BEFORE


ZONES_LIST = [dt.UTC, dt.timezone(dt.timedelta(hours=5)), dt.timezone(dt.timedelta(hours=-5)), None]
ZONES = st.sampled_from(ZONES_LIST)
EDGES = [dt.datetime.min, dt.datetime.max]  # where conversion to UTC (or to a zone) overflows
CURSORS = st.one_of(
    st.sampled_from([_cursor(f"{e.replace(tzinfo=z).isoformat()}|1") for e in EDGES for z in ZONES_LIST]),
    st.builds(
        lambda when, zone, pk: _cursor(f"{when.replace(tzinfo=zone).isoformat()}|{pk}"),
        st.one_of(st.sampled_from(EDGES), st.datetimes(min_value=EDGES[0], max_value=EDGES[1])),
        ZONES,
        st.one_of(st.integers(min_value=-5, max_value=10**25), NASTY),
    ),
    st.binary(max_size=40).map(lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")),
    TEXT,
)
GALLERY_FIELDS = ["q", "kind", "state", "person", "device", "since", "until", "bookmarked"]


@settings(FUZZ, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(params=st.dictionaries(st.sampled_from(GALLERY_FIELDS), TEXT, max_size=3), cursor=CURSORS)
def test_fuzz_the_gallery(member, device, params, cursor):
    response = quiet_client(member).get("/jobs/", {**params, "cursor": cursor})
    assert response.status_code < 500, (params, cursor, response.status_code)


@pytest.mark.parametrize("value", ["-5539547", "jobs-queue", "https://evil.example/", "//evil.example/x"])
def test_a_next_that_is_not_a_path_of_ours_goes_back_to_the_default(member_client, member, device, value):
    """Found by hub/tests/test_fuzz.py: ``redirect("-5539547")`` took the word for a URL name and answered 500."""
    job = make_job(member, device, state="queued")
    response = member_client.post(f"/jobs/{job.pk}/cancel/", {"next": value})
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    usage = member_client.post(f"/usage/results/{job.pk}/delete/", {"next": value})
    assert usage.status_code == 302 and usage["Location"] == "/usage/"
