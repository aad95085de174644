""" "Any capable device" on every door: the page, ``POST /api/jobs`` and /v1 queue a job for the pool of the devices
that can do exactly it; a pinned one its device can't do is refused, naming what is missing.

Two Tiinys that differ: Home renders every canvas and has a speech model (and holds the video model); Office renders
832x480 only and has no speech model. No worker runs: the jobs are rows, the pool's work is recorded (``sent``).
"""

from __future__ import annotations

import html

import httpx
import openai
import pytest
from django.test import Client

from devices.models import Device
from jobs.models import Job
from jobs.queue import enqueue
from jobs.tests.ui_fixtures import MESH, PNG, TTS, VIDEO, another_tiiny, capabilities, make_job

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]  # the SDK's Sora note

VIDEO_FIELDS = {"model": VIDEO, "prompt": "a fox in the snow", "size": "832x480", "seconds": 2, "steps": 4}


@pytest.fixture(autouse=True)
def _quiet(settings, monkeypatch):
    settings.HUB_API_SUBMIT_RATE = "0"
    monkeypatch.setattr(enqueue, "send", lambda *a, **kw: None)  # no broker: the pool's work is not sent


@pytest.fixture
def home(db):
    return another_tiiny("Home", capabilities(), loaded=(VIDEO,))


@pytest.fixture
def office(db, home):
    narrow = capabilities()
    narrow["models"] = [m for m in narrow["models"] if m["id"] != TTS]
    narrow["video"][VIDEO]["canvases"] = ["832x480"]
    return another_tiiny("Office", narrow)


@pytest.fixture
def both(home, office):
    return sorted([home.pk, office.pk])


def _bearer(user, scopes=("read", "submit")) -> Client:
    from hub.accounts.tokens import token_create

    raw = token_create(user=user, name="script", scopes=list(scopes))[1]
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


@pytest.fixture
def bearer(member):
    return _bearer(member)


def page_post(device="any", **over):
    return {"device": device, "kind": "video", "when": "asap", "polite": "on", **VIDEO_FIELDS, **over}


def rest_body(**over):
    return {"kind": "video", **VIDEO_FIELDS, **over}


def v1_video(client: Client, headers=None, **over):
    body = {"model": VIDEO, "prompt": "a fox", "size": "832x480", "seconds": "2", **over}
    return client.post("/v1/videos", body, content_type="application/json", headers=headers or {})


def _text(response) -> str:
    return html.unescape(response.content.decode())


# -- each door queues a pool job with the same pool -----------------------------------------------------------------


def test_each_door_queues_a_pool_job_for_every_device_that_can_do_it(member_client, bearer, both):
    page = member_client.post("/jobs/new/", page_post())
    assert page.status_code == 302, _text(page)[:2000]
    rest = bearer.post("/api/jobs", rest_body(), content_type="application/json")
    rest_any = bearer.post("/api/jobs", rest_body(device="any"), content_type="application/json")
    v1 = v1_video(bearer)
    assert (rest.status_code, rest_any.status_code, v1.status_code) == (201, 201, 200), v1.content
    jobs = list(Job.objects.order_by("pk"))
    assert len(jobs) == 4
    assert [(j.pinned, sorted(j.pool)) for j in jobs] == [(False, both)] * 4
    assert (rest.json()["pinned"], sorted(rest.json()["pool"])) == (False, both)
    # The page's unticked "polite" stays off through the pool's check (the API's default is on).
    member_client.post("/jobs/new/", {k: v for k, v in page_post().items() if k != "polite"})
    assert Job.objects.order_by("-pk").first().polite is False


def test_a_request_only_one_device_can_do_goes_to_that_one(member_client, bearer, home, office):
    wide = {"size": "1344x768"}  # Office renders 832x480 only
    assert member_client.post("/jobs/new/", page_post(**wide)).status_code == 302
    assert bearer.post("/api/jobs", rest_body(**wide), content_type="application/json").status_code == 201
    assert v1_video(bearer, **wide).status_code == 200
    speech = {
        "kind": "speech",
        "model": TTS,
        "input": "good night",
        "voice": "serena",
        "response_format": "wav",
    }
    assert bearer.post("/api/jobs", speech, content_type="application/json").status_code == 201  # Home only
    jobs = list(Job.objects.order_by("pk"))
    assert [(j.device_id, j.pool) for j in jobs] == [(home.pk, [home.pk])] * 4


def test_a_request_no_device_can_do_names_each_devices_reason(member_client, bearer, both):
    odd = {"size": "640x640"}
    page = member_client.post("/jobs/new/", page_post(**odd))
    rest = bearer.post("/api/jobs", rest_body(**odd), content_type="application/json")
    v1 = v1_video(bearer, **odd)
    assert (page.status_code, rest.status_code, v1.status_code) == (400, 422, 400)
    for said in (_text(page), rest.json()["errors"]["size"][0], v1.json()["error"]["message"]):
        assert "No device can do exactly this." in said
        assert (
            "Home: This model only renders 1344x768" in said
            and "Office: This model only renders 832x480" in said
        )
    assert v1.json()["error"]["param"] == "size"
    assert not Job.objects.exists()


def test_the_same_reason_on_every_device_is_said_once_in_the_doors_words(bearer, both):
    rest = bearer.post("/api/jobs", rest_body(prompt=""), content_type="application/json")
    assert rest.status_code == 422 and "No device can" not in rest.json()["detail"]
    v1 = v1_video(bearer, prompt="")
    assert v1.status_code == 400 and "No device can" not in v1.json()["error"]["message"]
    unknown = v1_video(bearer, model="Nope/Model").json()[
        "error"
    ]  # each device in its words; /v1's code kept
    assert unknown["code"] == "model_not_found" and unknown["param"] == "model"
    assert "not on Home" in unknown["message"] and "not on Office" in unknown["message"]


# -- pinned: refused at submit, naming what is missing --------------------------------------------------------------


def test_a_pinned_request_its_device_cannot_do_is_refused_naming_what_is_missing(
    member_client, bearer, home, office
):
    wide = {"size": "1344x768"}
    page = member_client.post("/jobs/new/", page_post(device=office.pk, **wide))
    rest = bearer.post("/api/jobs", rest_body(device=office.pk, **wide), content_type="application/json")
    v1 = v1_video(bearer, headers={"X-Hub-Device": "Office"}, **wide)
    assert (page.status_code, rest.status_code, v1.status_code) == (400, 422, 400)
    for said in (_text(page), rest.json()["errors"]["size"][0], v1.json()["error"]["message"]):
        assert "Office does not render “1344x768”." in said
    model = bearer.post(
        "/api/jobs", rest_body(device=office.pk, model="Foo/Bar"), content_type="application/json"
    )
    assert model.json()["errors"]["model"][0].startswith("Office has no model “Foo/Bar”.")
    no_tts = {"kind": "speech", "model": TTS, "input": "hi", "device": office.pk}
    refused = bearer.post("/api/jobs", no_tts, content_type="application/json").json()
    assert "Office has no model for speech right now." in refused["detail"]
    voice = {"kind": "speech", "model": TTS, "input": "hi", "voice": "nobody", "device": home.pk}
    assert (
        "Home has no voice “nobody”."
        in bearer.post("/api/jobs", voice, content_type="application/json").json()["detail"]
    )
    v1_voice = bearer.post(
        "/v1/audio/speech",
        {"model": TTS, "input": "hi", "voice": "nobody"},
        content_type="application/json",
        headers={"X-Hub-Device": str(home.pk)},
    )
    assert (
        v1_voice.status_code == 400 and "Home has no voice “nobody”." in v1_voice.json()["error"]["message"]
    )
    assert not Job.objects.exists()


def test_a_named_device_pins_the_job_at_every_door(member_client, bearer, home, office):
    assert member_client.post("/jobs/new/", page_post(device=office.pk)).status_code == 302
    assert (
        bearer.post("/api/jobs", rest_body(device=office.pk), content_type="application/json").status_code
        == 201
    )
    assert v1_video(bearer, headers={"X-Hub-Device": "office"}).status_code == 200
    assert [(j.pinned, j.device_id) for j in Job.objects.order_by("pk")] == [(True, office.pk)] * 3
    shown = bearer.get(f"/api/jobs/{Job.objects.first().pk}").json()
    assert (shown["pinned"], shown["pool"]) == (True, [office.pk])


# -- the page: the choice, the summary, run again, the job page ----------------------------------------------------


def test_any_is_the_default_choice_only_when_more_than_one_online_device_runs_the_kind(
    member_client, home, office
):
    page = member_client.get("/jobs/new/").content.decode()
    assert '<option value="any" selected>Any capable device</option>' in page
    assert '<input type="hidden" name="device" value="any">' in page and "on any capable device" in page
    speech = member_client.get("/jobs/new/?kind=speech").content.decode()  # Home alone has a speech model
    assert '<option value="any" >' in speech and f'name="device" value="{home.pk}"' in speech
    Device.objects.filter(pk=office.pk).update(state=Device.State.UNREACHABLE)
    alone = member_client.get("/jobs/new/").content.decode()
    assert f'name="device" value="{home.pk}"' in alone
    chosen = member_client.get("/jobs/new/?device=any").content.decode()  # still a choice: the pool of two
    assert 'name="device" value="any"' in chosen and "whichever of Home, Office" in chosen


def test_the_summary_says_where_it_would_start_first_and_who_can_do_it(member_client, home, office):
    any_of = member_client.post("/jobs/new/admission/", page_post()).content.decode()
    assert (
        "Runs first on <strong>Home</strong>, around" in any_of and "any of Home, Office can do it" in any_of
    )
    only = member_client.post("/jobs/new/admission/", page_post(size="1344x768")).content.decode()
    assert "only Home can do exactly this" in only and "disabled" not in only.split('id="job-submit"')[1][:40]
    none = _text(member_client.post("/jobs/new/admission/", page_post(size="640x640")))
    assert "No device can do exactly this. Home: " in none and "; Office: " in none


def test_a_summary_with_office_shown_still_queues_what_only_home_can_do(member_client, home, office):
    """The form shown is the first online device's; another device of the pool may do what it refuses."""
    Device.objects.filter(pk=home.pk).update(is_default=False)
    Device.objects.filter(pk=office.pk).update(is_default=True)
    page = member_client.get("/jobs/new/").content.decode()
    assert "the form offers Office's models and settings" in page
    response = member_client.post("/jobs/new/", page_post(size="1344x768"))
    assert response.status_code == 302
    assert Job.objects.get().pool == [home.pk]


def test_the_submit_token_still_queues_once(member_client, both):
    data = page_post(submit_token="T" * 32)
    first = member_client.post("/jobs/new/", data)
    again = member_client.post("/jobs/new/", data)
    assert first.status_code == again.status_code == 302 and first["Location"] == again["Location"]
    assert Job.objects.count() == 1


def test_a_refused_pool_try_keeps_its_picture_for_the_next_try(member_client, home, office, media):
    from django.core.files.uploadedfile import SimpleUploadedFile

    token = "U" * 32
    mesh = {"device": "any", "kind": "mesh", "model": MESH, "when": "not_before", "submit_token": token}
    first = member_client.post(
        "/jobs/new/", {**mesh, "image": SimpleUploadedFile("obj.png", PNG, "image/png")}
    )
    assert first.status_code == 400 and "Keeping <strong>obj.png</strong>" in first.content.decode()
    second = member_client.post("/jobs/new/", {**mesh, "when": "asap"})  # no file sent: the kept one is used
    assert second.status_code == 302, _text(second)[:3000]
    job = Job.objects.get()
    assert (job.pinned, sorted(job.pool)) == (False, sorted([home.pk, office.pk]))


def test_run_again_of_a_pool_job_keeps_it_in_the_pool(member_client, bearer, member, home, office, both):
    job = make_job(member, office, pinned=False, pool=both, state="done")
    page = member_client.post(
        f"/jobs/{job.pk}/again/",
        {"model": VIDEO, "prompt": "again", "size": "832x480", "seconds": 2, "steps": 4, "when": "asap"},
    )
    assert page.status_code == 302, _text(page)[:2000]
    rest = bearer.post(f"/api/jobs/{job.pk}/again", {"prompt": "again"}, content_type="application/json")
    assert rest.status_code == 201, rest.content
    pinned = make_job(member, office, state="done")
    assert bearer.post(f"/api/jobs/{pinned.pk}/again", {}, content_type="application/json").status_code == 201
    made = list(Job.objects.exclude(pk__in=[job.pk, pinned.pk]).order_by("pk"))
    assert [(j.pinned, sorted(j.pool)) for j in made] == [(False, both), (False, both), (True, [])]
    assert member_client.post(f"/jobs/{job.pk}/again/", {}).status_code == 400  # nothing sent: the form again
    wide = bearer.post(f"/api/jobs/{job.pk}/again", {"size": "1344x768"}, content_type="application/json")
    assert wide.status_code == 201 and wide.json()["pool"] == [home.pk] and wide.json()["device"] == home.pk


def test_the_job_page_says_any_device_and_where(member_client, member, home, office, both):
    waiting = make_job(member, home, pinned=False, pool=both)
    ran = make_job(member, office, pinned=False, pool=both, state="done")
    pinned = make_job(member, office)
    assert "Any device · waiting on <a" in member_client.get(f"/jobs/{waiting.pk}/").content.decode()
    page = member_client.get(f"/jobs/{ran.pk}/").content.decode()
    assert "Any device · ran on <a" in page and ">Office</a>" in page
    plain = member_client.get(f"/jobs/{pinned.pk}/").content.decode()
    assert "Any device" not in plain and f'id="job-{pinned.pk}-device">on <a' in plain


# -- no leak: a viewer can't submit through any door ----------------------------------------------------------------


def test_a_viewer_cannot_queue_for_the_pool(viewer, viewer_client, both):
    page = viewer_client.post("/jobs/new/", page_post())
    assert page.status_code == 403
    reader = _bearer(viewer, scopes=("read",))
    assert reader.post("/api/jobs", rest_body(), content_type="application/json").status_code == 403
    assert v1_video(reader).status_code == 403
    assert not Job.objects.exists()


def test_the_schema_declares_pinned_pool_and_the_any_device(bearer, both):
    schema = bearer.get("/api/openapi.json").json()
    job_out = schema["components"]["schemas"]["JobOut"]["properties"]
    assert job_out["pinned"]["type"] == "boolean" and job_out["pool"]["items"]["type"] == "integer"
    body = schema["paths"]["/api/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    device = body["oneOf"][0]["properties"]["device"]
    assert {"type": "string", "enum": ["any"]} in device["oneOf"]


# -- the real openai SDK -----------------------------------------------------------------------------------------------


def _through_django(request: httpx.Request) -> httpx.Response:
    """httpx's request answered by Django's test client (the test's database; no server, no thread)."""
    skip = {"content-length", "content-type", "host"}
    answer = Client().generic(
        request.method,
        request.url.raw_path.decode(),
        data=request.content,
        content_type=request.headers.get("content-type", ""),
        headers={k: v for k, v in request.headers.items() if k.lower() not in skip},
    )
    return httpx.Response(answer.status_code, headers=dict(answer.items()), content=answer.content)


def test_the_openai_sdk_queues_for_the_pool_or_pins_with_x_hub_device(member, both, office):
    """The SDK, unchanged, its HTTP answered by this hub (``httpx.MockTransport`` into Django's test client)."""
    from hub.accounts.tokens import token_create

    raw = token_create(user=member, name="sdk", scopes=["read", "submit"])[1]
    with openai.OpenAI(
        base_url="http://testserver/v1",
        api_key=raw,
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(_through_django)),
    ) as sdk:
        pooled = sdk.videos.create(model=VIDEO, prompt="a fox", size="832x480", seconds="4")
        pinned = sdk.videos.create(
            model=VIDEO, prompt="a fox", size="832x480", seconds="4", extra_headers={"X-Hub-Device": "Office"}
        )
        with pytest.raises(openai.BadRequestError) as refused:
            sdk.videos.create(model=VIDEO, prompt="a fox", size="1280x720", seconds="4")
    jobs = {j.pk: j for j in Job.objects.all()}
    first = jobs[int(pooled.id.removeprefix("video_"))]
    second = jobs[int(pinned.id.removeprefix("video_"))]
    assert (first.pinned, sorted(first.pool)) == (False, both)
    assert (second.pinned, second.device_id) == (True, office.pk)
    assert refused.value.param == "size" and "No device can do exactly this." in refused.value.message
