"""REST API /api/jobs and /api/devices/{id}/plan: real tokens (Bearer) through the whole Django stack.

Jobs are rows (``ui_fixtures``); a submission commits nothing to a worker (dispatch runs on commit, which
these rolled-back tests never reach), so no engine is needed.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from hub.accounts.tokens import token_create
from jobs.models import Job
from jobs.tests.ui_fixtures import MESH, PNG, VIDEO, add_artifact, make_job

pytestmark = pytest.mark.django_db
ROLES = ("owner", "other", "viewer", "admin", "anon")


@pytest.fixture(autouse=True)
def _fresh_rate_counters(redis_client):
    # Rolled-back tests reuse token ids, so one test's counter would leak into the next.
    for key in redis_client.scan_iter("*ratelimit:submit:*"):
        redis_client.delete(key)


def token_client(user, scopes=("read", "submit")) -> Client:
    _, raw = token_create(user=user, name="script", scopes=list(scopes))
    return Client(headers={"Authorization": f"Bearer {raw}"})


@pytest.fixture
def clients(admin_user, member, other_member, viewer):
    """One client per role: mia owns the jobs, otto is another member, vic a viewer (read token)."""
    return {
        "owner": token_client(member),
        "other": token_client(other_member),
        "viewer": token_client(viewer, scopes=("read",)),
        "admin": token_client(admin_user),
        "anon": Client(),
    }


def post_json(client: Client, url: str, body) -> object:
    return client.post(url, json.dumps(body), content_type="application/json")


def video_body(device, /, **over):
    body = {
        "device": device.pk,
        "kind": "video",
        "model": VIDEO,
        "prompt": "a fox in the snow",
        "size": "832x480",
        "seconds": 2,
        "steps": 4,
    }
    body.update(over)
    return body


# -- the documentation -------------------------------------------------------------------------------------------
def test_openapi_lists_every_route_with_its_response_schema(client):
    schema = client.get("/api/openapi.json").json()
    paths = schema["paths"]
    expected = {
        "/api/jobs": {"get", "post"},
        "/api/jobs/{job_id}": {"get"},
        "/api/jobs/{job_id}/cancel": {"post"},
        "/api/jobs/{job_id}/retry": {"post"},
        "/api/jobs/{job_id}/again": {"post"},
        "/api/jobs/{job_id}/share": {"post"},
        "/api/jobs/{job_id}/artifacts/{artifact_id}": {"get"},
        "/api/devices": {"get"},
        "/api/devices/{device_id}": {"get"},
        "/api/devices/{device_id}/capabilities": {"get"},
        "/api/devices/{device_id}/metrics": {"get"},
        "/api/devices/{device_id}/metrics/history": {"get"},
        "/api/devices/{device_id}/plan": {"get"},
    }
    for path, methods in expected.items():
        assert path in paths, path
        assert methods <= set(paths[path]), (path, set(paths[path]))
    components = schema["components"]["schemas"]
    assert {"SubmittedOut", "JobDetailOut", "JobListOut", "DeviceOut", "PlanOut", "ErrorOut"} <= set(
        components
    )
    body = paths["/api/jobs"]["post"]["requestBody"]["content"]
    assert "multipart/form-data" in body
    assert len(body["application/json"]["schema"]["oneOf"]) == 7  # every (device kind, job kind)
    assert "422" in paths["/api/jobs"]["post"]["responses"]
    assert client.get("/api/docs").status_code == 200


# -- submission ------------------------------------------------------------------------------------------------
def test_it_queues_a_video_from_json_and_answers_201_with_the_job(clients, member, device):
    response = post_json(clients["owner"], "/api/jobs", video_body(device))
    assert response.status_code == 201, response.content
    body = response.json()
    job = Job.objects.get()
    assert body["id"] == job.pk and job.owner == member and job.params["size"] == "832x480"
    assert body["state"] in ("queued", "scheduled") and body["estimate_s"] > 0
    assert body["estimate_ready_at"] and body["estimate_starts_at"] and isinstance(body["warnings"], list)
    assert body["url"].endswith(f"/jobs/{job.pk}/") and body["api_url"].endswith(f"/api/jobs/{job.pk}")
    assert body["events"][0]["message"]
    assert job.polite is True and job.when == "asap"  # the form's defaults when left out


def test_it_uses_the_default_device_when_none_is_named(clients, device):
    body = video_body(device)
    del body["device"]
    assert post_json(clients["owner"], "/api/jobs", body).status_code == 201
    assert Job.objects.get().device == device


def test_it_queues_a_3d_job_from_multipart_with_its_picture(clients, device, media):
    data = {"device": str(device.pk), "kind": "mesh", "model": MESH, "simplify": "true", "texture": "false"}
    data["image"] = SimpleUploadedFile("obj.png", PNG, "image/png")
    response = clients["owner"].post("/api/jobs", data)
    assert response.status_code == 201, response.content
    job = Job.objects.get()
    assert job.kind == "mesh" and job.params["stages"] == ["shape", "simplify", "export"]
    assert response.json()["params"]["files"] == {"image": "image.png"}  # a name, never a server path


def test_a_refusal_names_the_field_with_the_forms_words(clients, member_client, device):
    """The same request through the page and through /api/ is refused with the same sentence."""
    for field, value in (("seconds", 8), ("size", "640x640")):
        response = post_json(clients["owner"], "/api/jobs", video_body(device, **{field: value}))
        assert response.status_code == 422, response.content
        body = response.json()
        message = body["errors"][field][0]
        assert field in body["detail"] and message in body["detail"]
        page = member_client.post(
            "/jobs/new/", {**video_body(device, **{field: value}), "when": "asap", "polite": "on"}
        )
        assert page.status_code == 400 and message in page.content.decode()
    assert Job.objects.count() == 0


def test_a_render_over_55_minutes_is_refused_as_on_the_page(clients, member_client, device):
    body = video_body(device, size="1344x768", seconds=7, steps=8)
    response = post_json(clients["owner"], "/api/jobs", body)
    assert response.status_code == 422
    (field, (message,)), *_ = response.json()["errors"].items()
    assert "refuses anything over 55 minutes" in message
    page = member_client.post("/jobs/new/", {**body, "when": "asap", "polite": "on"})
    assert page.status_code == 400 and message in page.content.decode()
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"secnds": 2}, "secnds", "Unknown field"),
        ({"width": 640}, "width", "its fields are"),  # a TensorSharp field on a Tiiny
        ({"seconds": "two"}, "seconds", "valid integer"),
        ({"seconds": [2]}, "seconds", "valid integer"),
        ({"prompt": {"a": 1}}, "prompt", "valid string"),
        ({"polite": "perhaps"}, "polite", "valid boolean"),
        ({"when": "someday"}, "when", "asap"),
        ({"start_image": "aGVsbG8="}, "start_image", "multipart/form-data"),
        ({"kind": "hologram"}, "kind", "one of video"),
        ({"kind": None}, "kind", "missing"),
        ({"device": 999999}, "device", "No such device"),
        ({"device": "²"}, "device", "No such device"),
        ({"device": "9" * 10000}, "device", "No such device"),
        ({"device": True}, "device", "No such device"),
        ({"prompt": ""}, "prompt", "required"),
        ({"when": "not_before"}, "not_before", "Give the time"),
    ],
)
def test_bad_fields_are_a_422_naming_the_field(clients, device, body, field, words):
    response = post_json(clients["owner"], "/api/jobs", video_body(device, **body))
    assert response.status_code == 422, response.content
    errors = response.json()["errors"]
    assert field in errors and words in " ".join(errors[field]), errors
    assert Job.objects.count() == 0


def test_an_unknown_field_names_the_kind_with_its_article(clients, device):
    body = {
        "kind": "image",
        "device": device.pk,
        "model": "Tongyi-MAI/Z-Image-Turbo",
        "prompt": "a",
        "size": "1x1",
    }
    response = post_json(clients["owner"], "/api/jobs", body)
    assert response.status_code == 422
    assert response.json()["errors"]["size"][0].startswith(
        "Unknown field for an image job on a Tiiny Pocket;"
    )


@pytest.mark.parametrize(
    ("raw", "status", "words"),
    [
        (b"{not json", 400, "not valid JSON"),
        (b"[1, 2]", 400, "JSON object"),
        (b'"video"', 400, "JSON object"),
        (b"\xff\xfe", 400, "not valid JSON"),
        (b"", 422, "kind"),
    ],
)
def test_unreadable_bodies_are_a_4xx_json(clients, device, raw, status, words):
    response = clients["owner"].post("/api/jobs", raw, content_type="application/json")
    assert response.status_code == status and words in response.json()["detail"]
    assert Job.objects.count() == 0


def test_a_huge_body_is_a_413_and_no_job(clients, device, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = video_body(device, prompt="x" * 20_000)
    response = post_json(clients["owner"], "/api/jobs", body)
    assert response.status_code == 413 and "too large" in response.json()["detail"]
    response = clients["owner"].post(
        "/api/jobs", {"kind": "mesh", "image": SimpleUploadedFile("a.png", PNG + b"\0" * 20_000, "image/png")}
    )
    assert response.status_code == 413
    assert Job.objects.count() == 0


def test_an_unsupported_content_type_is_a_415(clients, device):
    response = clients["owner"].post("/api/jobs", b"kind=video", content_type="text/csv")
    assert response.status_code == 415 and "application/json" in response.json()["detail"]


def test_viewers_and_read_tokens_cannot_submit(clients, member, viewer, device):
    assert post_json(clients["viewer"], "/api/jobs", video_body(device)).status_code == 403
    read_only = token_client(member, scopes=("read",))
    response = post_json(read_only, "/api/jobs", video_body(device))
    assert response.status_code == 403 and "submit scope" in response.json()["detail"]
    session = Client()
    session.force_login(viewer)
    response = post_json(session, "/api/jobs", video_body(device))
    assert response.status_code == 403 and "Viewers" in response.json()["detail"]
    assert post_json(Client(), "/api/jobs", video_body(device)).status_code == 401
    assert Job.objects.count() == 0


def test_submissions_over_the_rate_answer_429_with_retry_after(clients, device, settings):
    settings.HUB_API_SUBMIT_RATE = "2/m"
    codes = [post_json(clients["owner"], "/api/jobs", video_body(device)).status_code for _ in range(3)]
    assert codes == [201, 201, 429]
    response = post_json(clients["owner"], "/api/jobs", video_body(device))
    assert response.status_code == 429 and 1 <= int(response["Retry-After"]) <= 60
    assert "Too many" in response.json()["detail"] and Job.objects.count() == 2


def test_the_browser_session_needs_the_csrf_token(member, device):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(member)
    assert browser.get("/api/jobs").status_code == 200  # reads need no CSRF token
    response = post_json(browser, "/api/jobs", video_body(device))
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    assert Job.objects.count() == 0
    browser.get("/jobs/new/")  # the page sets the CSRF cookie
    token = browser.cookies["csrftoken"].value
    response = browser.post(
        "/api/jobs", json.dumps(video_body(device)), content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert response.status_code == 201 and Job.objects.count() == 1


# -- reading -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["abc", "9" * 10000, "²", "-1", "0", "1.5", "%20%31", "12abc"])
def test_bad_job_ids_are_a_404_json(clients, bad):
    for url in (f"/api/jobs/{bad}", f"/api/jobs/{bad}/artifacts/1"):
        response = clients["owner"].get(url)
        assert response.status_code == 404 and response.json()["detail"] == "No such job.", url
    for action, body in (("cancel", {}), ("retry", {}), ("share", {"shared": True}), ("again", {})):
        response = post_json(clients["owner"], f"/api/jobs/{bad}/{action}", body)
        assert response.status_code == 404, (action, response.content)


def test_someone_elses_private_job_is_indistinguishable_from_a_missing_one(clients, member, device):
    job = make_job(member, device)
    mine = clients["other"].get(f"/api/jobs/{job.pk}")
    missing = clients["other"].get(f"/api/jobs/{job.pk + 1000}")
    assert mine.status_code == missing.status_code == 404 and mine.json() == missing.json()


def test_a_job_shows_progress_eta_events_and_files(clients, member, device, media):
    job = make_job(member, device, state="running")
    artifact = add_artifact(job, media)
    body = clients["owner"].get(f"/api/jobs/{job.pk}").json()
    assert body["progress"] == 37.0 and body["phase"] == "Rendering step 3 of 4"
    assert body["eta"]["remaining_s"] > 0 and body["predicted_finish"]
    assert [e["seq"] for e in body["events"]] == [1, 2]
    (file,) = body["artifacts"]
    assert file["id"] == artifact.pk and file["download_url"].endswith(
        f"/api/jobs/{job.pk}/artifacts/{artifact.pk}"
    )


def test_a_failed_job_says_why(clients, member, device):
    job = make_job(
        member, device, state="failed", error_code="device_error", error_human="The render failed."
    )
    body = clients["owner"].get(f"/api/jobs/{job.pk}").json()
    assert body["error"]["code"] == "device_error" and body["error"]["message"] == "The render failed."


def test_the_list_pages_with_a_cursor_and_filters(clients, member, other_member, device):
    base = timezone.now() - dt.timedelta(hours=1)
    mine = []
    for i in range(5):
        job = make_job(member, device, prompt=f"lighthouse {i}", state="done" if i % 2 else "queued")
        Job.objects.filter(pk=job.pk).update(created=base + dt.timedelta(minutes=i))
        mine.append(job.pk)
    make_job(other_member, device, prompt="private of otto")
    seen, cursor = [], ""
    while True:
        page = (
            clients["owner"].get("/api/jobs", {"limit": 2, **({"cursor": cursor} if cursor else {})}).json()
        )
        seen += [j["id"] for j in page["items"]]
        if not page["next"]:
            break
        cursor = page["next"]
    assert seen == mine[::-1]  # newest first, nothing repeated, otto's private job absent
    done = clients["owner"].get("/api/jobs", {"state": "done"}).json()["items"]
    assert {j["id"] for j in done} == {mine[1], mine[3]}
    assert [j["id"] for j in clients["owner"].get("/api/jobs", {"q": "lighthouse 4"}).json()["items"]] == [
        mine[4]
    ]
    assert clients["owner"].get("/api/jobs", {"owner": "otto"}).json()["items"] == []
    admin = clients["admin"].get("/api/jobs", {"owner": "otto"}).json()["items"]
    assert [j["prompt"] for j in admin] == ["private of otto"]
    assert len(clients["owner"].get("/api/jobs", {"kind": "video", "device": device.pk}).json()["items"]) == 5


def test_the_list_searches_as_the_gallery_does_every_word_in_any_order(clients, member, device):
    kite = make_job(member, device, prompt="Sunset over a KITE festival")
    make_job(member, device, prompt="a sunset over the sea")
    make_job(member, device, prompt="a kite in the rain")
    for q in ("kite sunset", "  SUNSET   kite ", "kite\tsun", "sunset kite kite"):
        items = clients["owner"].get("/api/jobs", {"q": q}).json()["items"]
        assert [j["id"] for j in items] == [kite.pk], q
    assert len(clients["owner"].get("/api/jobs", {"q": "sunset"}).json()["items"]) == 2
    assert len(clients["owner"].get("/api/jobs", {"q": "   "}).json()["items"]) == 3  # no words: no filter


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"state": "sleeping"}, "state"),
        ({"kind": "hologram"}, "kind"),
        ({"device": "²"}, "device"),
        ({"cursor": "!!!"}, "cursor"),
    ],
)
def test_bad_list_parameters_are_a_readable_422(clients, query, field):
    response = clients["owner"].get("/api/jobs", query)
    assert response.status_code == 422
    body = response.json()
    assert field in body["errors"] and body["detail"].startswith(field), body


# -- actions ---------------------------------------------------------------------------------------------------------
def test_cancel_with_a_reason_and_without_a_body(clients, member, device):
    job = make_job(member, device)
    response = post_json(clients["admin"], f"/api/jobs/{job.pk}/cancel", {"reason": "device maintenance"})
    assert response.status_code == 200 and response.json()["state"] == "cancelled"
    assert response.json()["cancel_reason"] == "device maintenance"
    other = make_job(member, device)
    response = clients["owner"].post(f"/api/jobs/{other.pk}/cancel")
    assert response.status_code == 200 and response.json()["state"] == "cancelled"
    again = post_json(clients["owner"], f"/api/jobs/{other.pk}/cancel", {})
    assert again.status_code == 200  # cancelling twice is harmless
    unknown = post_json(clients["owner"], f"/api/jobs/{other.pk}/cancel", {"reasn": "x"})
    assert unknown.status_code == 422 and "reasn" in unknown.json()["errors"]


def test_a_finished_job_cannot_be_cancelled(clients, member, device):
    job = make_job(member, device, state="done")
    response = post_json(clients["owner"], f"/api/jobs/{job.pk}/cancel", {})
    assert response.status_code == 422 and "already finished" in response.json()["detail"]


def test_retry_puts_a_failed_job_back_and_refuses_a_done_one(clients, member, device):
    job = make_job(member, device, state="failed")
    response = clients["owner"].post(f"/api/jobs/{job.pk}/retry")
    assert response.status_code == 200 and response.json()["state"] == "queued"
    done = make_job(member, device, state="done")
    response = clients["owner"].post(f"/api/jobs/{done.pk}/retry")
    assert response.status_code == 422 and "retried" in response.json()["detail"]


def test_again_with_changes_makes_a_new_job_checked_like_a_new_one(clients, member, device):
    job = make_job(member, device, state="done")
    response = post_json(clients["owner"], f"/api/jobs/{job.pk}/again", {"seconds": 3, "prompt": "a wolf"})
    assert response.status_code == 201, response.content
    new = Job.objects.get(pk=response.json()["id"])
    assert new.params["seconds"] == 3 and new.prompt == "a wolf" and new.params["size"] == "832x480"
    refused = post_json(clients["owner"], f"/api/jobs/{job.pk}/again", {"seconds": 8})
    assert refused.status_code == 422 and "seconds" in refused.json()["errors"]
    unknown = post_json(clients["owner"], f"/api/jobs/{job.pk}/again", {"kind": "music"})
    assert unknown.status_code == 422 and "kind" in unknown.json()["errors"]
    assert post_json(clients["owner"], f"/api/jobs/{job.pk}/again", {}).status_code == 201
    assert Job.objects.count() == 3


def test_again_reuses_the_input_picture(clients, member, device, media):
    data = {"device": str(device.pk), "kind": "mesh", "model": MESH, "simplify": "true"}
    data["image"] = SimpleUploadedFile("obj.png", PNG, "image/png")
    first = clients["owner"].post("/api/jobs", data).json()
    response = post_json(clients["owner"], f"/api/jobs/{first['id']}/again", {"texture": True})
    assert response.status_code == 201, response.content
    new = Job.objects.get(pk=response.json()["id"])
    assert new.params["files"] == Job.objects.get(pk=first["id"]).params["files"]
    assert new.params["stages"] == ["shape", "simplify", "texture", "export"]


def test_share_and_unshare(clients, member, device):
    job = make_job(member, device, state="done")
    assert clients["other"].get(f"/api/jobs/{job.pk}").status_code == 404
    response = post_json(clients["owner"], f"/api/jobs/{job.pk}/share", {"shared": True})
    assert response.status_code == 200 and response.json()["shared"] is True
    assert clients["other"].get(f"/api/jobs/{job.pk}").status_code == 200
    # A shared job can be seen but not changed by others.
    assert post_json(clients["other"], f"/api/jobs/{job.pk}/share", {"shared": False}).status_code == 403
    assert (
        post_json(clients["owner"], f"/api/jobs/{job.pk}/share", {"shared": False}).json()["shared"] is False
    )
    bad = post_json(clients["owner"], f"/api/jobs/{job.pk}/share", {"shared": "sometimes"})
    assert bad.status_code == 422 and "shared" in bad.json()["errors"]
    missing = post_json(clients["owner"], f"/api/jobs/{job.pk}/share", {})
    assert missing.status_code == 422 and missing.json()["errors"] == {"shared": ["This field is required."]}
    malformed = clients["owner"].post(f"/api/jobs/{job.pk}/share", b"{", content_type="application/json")
    assert malformed.status_code == 400 and "not valid JSON" in malformed.json()["detail"]


def test_artifacts_download_with_ranges_like_the_web(clients, member, device, media):
    job = make_job(member, device, state="done")
    data = b"\x00\x00\x00\x18ftypmp42" + bytes(range(256))
    artifact = add_artifact(job, media, data=data)
    url = f"/api/jobs/{job.pk}/artifacts/{artifact.pk}"
    response = clients["owner"].get(url)
    assert response.status_code == 200 and b"".join(response.streaming_content) == data
    assert response["Content-Type"] == "video/mp4"
    part = clients["owner"].get(url, HTTP_RANGE="bytes=4-7")
    assert part.status_code == 206 and b"".join(part.streaming_content) == b"ftyp"
    assert clients["owner"].get(f"/api/jobs/{job.pk}/artifacts/{artifact.pk + 1}").status_code == 404
    assert clients["owner"].get(f"/api/jobs/{job.pk}/artifacts/²").status_code == 404
    other_job = make_job(member, device, state="done")
    # An artifact id of another job, through this job's URL: not found.
    assert clients["owner"].get(f"/api/jobs/{other_job.pk}/artifacts/{artifact.pk}").status_code == 404


# -- who may do what: every route, every role ------------------------------------------------------------------------
def _scene(member, other_member, device, media):
    private = make_job(member, device, state="failed")
    add_artifact(private, media)
    return private


ACCESS = [
    # (name, method, url template, body, {role: status})
    ("list", "get", "/api/jobs", None, dict(owner=200, other=200, viewer=200, admin=200, anon=401)),
    ("get", "get", "/api/jobs/{job}", None, dict(owner=200, other=404, viewer=404, admin=200, anon=401)),
    ("file", "get", "/api/jobs/{job}/artifacts/{art}", None, dict(owner=200, other=404, viewer=404, admin=200, anon=401)),
    ("cancel", "post", "/api/jobs/{queued}/cancel", {}, dict(owner=200, other=404, viewer=403, admin=200, anon=401)),
    ("retry", "post", "/api/jobs/{job}/retry", None, dict(owner=200, other=404, viewer=403, admin=200, anon=401)),
    ("again", "post", "/api/jobs/{job}/again", {}, dict(owner=201, other=404, viewer=403, admin=201, anon=401)),
    ("share", "post", "/api/jobs/{job}/share", {"shared": True}, dict(owner=200, other=404, viewer=403, admin=200, anon=401)),
    ("submit", "post", "/api/jobs", "video", dict(owner=201, other=201, viewer=403, admin=201, anon=401)),
    ("plan", "get", "/api/devices/{device}/plan", None, dict(owner=200, other=200, viewer=200, admin=200, anon=401)),
]  # fmt: skip


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(("name", "method", "url", "body", "expected"), ACCESS, ids=[a[0] for a in ACCESS])
def test_access_table(clients, member, other_member, device, media, role, name, method, url, body, expected):
    job = make_job(member, device, state="failed")
    art = add_artifact(job, media)
    queued = make_job(member, device)
    url = url.format(job=job.pk, art=art.pk, queued=queued.pk, device=device.pk)
    client = clients[role]
    if method == "get":
        response = client.get(url)
    elif body == "video":
        response = post_json(client, url, video_body(device))
    elif body is None:
        response = client.post(url)
    else:
        response = post_json(client, url, body)
    assert response.status_code == expected[role], (role, name, response.content[:300])
    if response.status_code >= 400:
        assert response["Content-Type"].startswith("application/json") and response.json()["detail"]
    if name == "list" and role in ("other", "viewer"):
        assert response.json()["items"] == []  # mia's jobs are private


# -- the plan ------------------------------------------------------------------------------------------------------
def test_the_plan_shows_order_times_and_why_without_private_prompts(clients, member, other_member, device):
    now = timezone.now()
    running = make_job(other_member, device, state="running", prompt="otto's secret render")
    first = make_job(member, device, prompt="mia's private fox")
    Job.objects.filter(pk=first.pk).update(created=now - dt.timedelta(minutes=3))
    shared = make_job(other_member, device, prompt="otto's shared owl", shared=True)
    Job.objects.filter(pk=shared.pk).update(created=now - dt.timedelta(minutes=2))
    tonight = make_job(member, device, prompt="tonight please", when="tonight")
    Job.objects.filter(pk=tonight.pk).update(created=now - dt.timedelta(minutes=1))
    device.night_start, device.night_end = (
        (now + dt.timedelta(hours=2)).time(),
        (now + dt.timedelta(hours=3)).time(),
    )
    device.save(update_fields=["night_start", "night_end"])

    plan = clients["other"].get(f"/api/devices/{device.pk}/plan").json()
    assert plan["running"]["id"] == running.pk and plan["running"]["prompt"] == "otto's secret render"
    rows = {r["id"]: r for r in plan["jobs"]}
    assert [r["position"] for r in plan["jobs"]] == [1, 2, 3]
    assert rows[first.pk]["prompt"] is None and rows[first.pk]["label"] == "Video by mia"
    assert rows[first.pk]["url"] is None and "mia's private fox" not in json.dumps(plan)
    assert rows[shared.pk]["prompt"] == "otto's shared owl"
    assert rows[first.pk]["waiting_because"].startswith("Behind 1 job")
    assert rows[tonight.pk]["waiting_because"].startswith("Waits for the night window")
    assert all(r["predicted_start"] and r["predicted_finish"] for r in plan["jobs"])

    mine = clients["owner"].get(f"/api/devices/{device.pk}/plan").json()
    assert {r["id"]: r["prompt"] for r in mine["jobs"]}[first.pk] == "mia's private fox"
    assert mine["running"]["prompt"] is None and mine["running"]["label"] == "Video by otto"
    assert "otto's secret render" not in json.dumps(mine)
    admin = clients["admin"].get(f"/api/devices/{device.pk}/plan").json()
    assert "otto's secret render" in json.dumps(admin) and "mia's private fox" in json.dumps(admin)


def test_a_paused_queue_says_so_for_every_job(clients, member, device):
    make_job(member, device)
    device.queue_paused = True
    device.save(update_fields=["queue_paused"])
    plan = clients["owner"].get(f"/api/devices/{device.pk}/plan").json()
    assert plan["paused"] and plan["blocked"] == "The queue is paused by an admin."
    assert plan["jobs"][0]["waiting_because"] == "The queue is paused by an admin."


@pytest.mark.parametrize("bad", ["abc", "9" * 10000, "²", "424242"])
def test_a_plan_for_a_bad_device_id_is_a_404(clients, bad):
    response = clients["owner"].get(f"/api/devices/{bad}/plan")
    assert response.status_code == 404 and response.json()["detail"] == "No such device."


def test_the_small_bodies_are_bounded_and_strict_too(clients, member, device, settings):
    job = make_job(member, device, state="done")
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    big = post_json(clients["owner"], f"/api/jobs/{job.pk}/share", {"shared": True, "pad": "x" * 2000})
    assert big.status_code == 413 and "too large" in big.json()["detail"]
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 5
    many = clients["owner"].post("/api/jobs", {f"f{i}": "1" for i in range(10)})
    assert many.status_code == 400 and many.json()["detail"].startswith("The request could not be read")
    assert Job.objects.count() == 1


def test_wrong_methods_and_head_on_files(clients, member, device, media):
    job = make_job(member, device, state="done")
    artifact = add_artifact(job, media)
    assert clients["owner"].get(f"/api/jobs/{job.pk}/cancel").status_code == 405
    head = clients["owner"].head(f"/api/jobs/{job.pk}/artifacts/{artifact.pk}")
    assert head.status_code == 200 and head["Accept-Ranges"] == "bytes"


def test_a_page_of_100_costs_a_few_queries_whatever_its_size(
    clients, member, device, django_assert_max_num_queries
):
    for i in range(100):
        make_job(member, device, prompt=f"job {i}")
    clients["owner"].get("/api/jobs", {"limit": 1})  # the token's "last used" write happens once a minute
    with django_assert_max_num_queries(4):
        page = clients["owner"].get("/api/jobs", {"limit": 100}).json()
    assert len(page["items"]) == 100 and page["next"] is None


def test_the_openapi_document_has_no_duplicate_keys(clients):
    """Swagger UI refuses a document with a key twice ("duplicated mapping key")."""
    import json

    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        assert len(keys) == len(set(keys)), f"duplicate keys: {keys}"
        return dict(pairs)

    response = clients["admin"].get("/api/openapi.json")
    json.loads(response.content, object_pairs_hook=no_duplicates)
