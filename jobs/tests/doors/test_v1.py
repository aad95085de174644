"""The OpenAI-compatible /v1 routes with Django's test client: shapes, errors, auth, scopes and privacy.

No worker runs here: jobs stay queued unless a test finishes them the way the worker would (state + files).
The SDK against a live hub is in test_v1_sdk.py.
"""

from __future__ import annotations

import base64
import json

import pytest
from django.test import Client

from jobs.models import Job
from jobs.tests.ui_fixtures import IMAGE, PNG, TTS, VIDEO, add_artifact, make_job

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_rate_limit(settings):
    # Token pks repeat from test to test (rolled back), so their counters in the shared Redis would add up.
    settings.HUB_API_SUBMIT_RATE = "0"


def token_for(user, scopes=("read", "submit")) -> str:
    from hub.accounts.tokens import token_create

    return token_create(user=user, name="script", scopes=list(scopes))[1]


def api(user=None, scopes=("read", "submit"), raw: str | None = None) -> Client:
    key = raw if raw is not None else token_for(user, scopes)
    return Client(HTTP_AUTHORIZATION=f"Bearer {key}")


def error_of(response, status: int) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


def post_video(client, headers=None, **fields):
    data = {"model": VIDEO, "prompt": "a fox", "size": "832x480", "seconds": "4", **fields}
    return client.post("/v1/videos", data, headers=headers)  # multipart, as the SDK sends it


# -- auth and scopes ----------------------------------------------------------------------------------------


def test_it_answers_401_in_openai_shape_without_or_with_a_bad_token(device):
    err = error_of(Client().get("/v1/models"), 401)
    assert err["code"] == "invalid_api_key"
    assert err["type"] == "invalid_request_error"
    err = error_of(api(raw="thub_" + "x" * 43).get("/v1/models"), 401)
    assert "Unknown token" in err["message"]
    err = error_of(api(raw="sk-nonsense").get("/v1/videos"), 401)
    assert "thub_" in err["message"]


def test_a_revoked_token_stops_working(member, device):
    from hub.accounts.tokens import token_create, token_revoke

    token, raw = token_create(user=member, name="s", scopes=["read"])
    client = api(raw=raw)
    assert client.get("/v1/models").status_code == 200
    token_revoke(token=token, by=member)
    assert error_of(client.get("/v1/models"), 401)["code"] == "invalid_api_key"


def test_a_read_token_cannot_submit(member, device):
    err = error_of(post_video(api(member, scopes=("read",))), 403)
    assert "submit" in err["message"]
    assert not Job.objects.exists()


def test_a_viewer_cannot_submit_even_with_a_token_made_before(viewer, member, device):
    from hub.accounts.models import ApiToken
    from hub.accounts.tokens import generate_token, hash_token

    raw = generate_token()  # as if they were a member when they made it
    ApiToken.objects.create(
        user=viewer, name="old", prefix=raw[5:13], key_hash=hash_token(raw), scopes="read,submit"
    )
    err = error_of(post_video(api(raw=raw)), 403)
    assert "Viewers" in err["message"]
    assert not Job.objects.exists()


def test_a_signed_in_browser_may_read_but_not_write(member_client, device):
    assert member_client.get("/v1/models").status_code == 200
    assert error_of(member_client.post("/v1/videos", {"prompt": "x"}), 401)["code"] == "invalid_api_key"


# -- videos ---------------------------------------------------------------------------------------------------


def test_it_queues_a_video_and_answers_the_sdks_video_object(member, device):
    response = post_video(api(member))
    assert response.status_code == 200, response.content
    video = response.json()
    job = Job.objects.get()
    assert video["id"] == f"video_{job.pk}"
    assert video["object"] == "video"
    assert video["status"] == "queued"
    assert (video["model"], video["size"], video["seconds"], video["progress"]) == (VIDEO, "832x480", "4", 0)
    assert video["prompt"] == "a fox" and video["error"] is None and video["expires_at"] is None
    assert video["completed_at"] is None and isinstance(video["created_at"], int)
    # an ordinary job: the owner's, through the same form (default steps filled in)
    assert job.owner == member and job.kind == "video"
    assert job.params == {"prompt": "a fox", "size": "832x480", "seconds": 4, "steps": 7}


def test_it_accepts_json_too(member, device):
    response = api(member).post(
        "/v1/videos",
        json.dumps({"model": VIDEO, "prompt": "a fox", "size": "480x832", "seconds": 2}),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    assert Job.objects.get().params["size"] == "480x832"


def test_it_keeps_an_input_reference_as_the_start_image(member, device, media):
    from django.core.files.uploadedfile import SimpleUploadedFile

    ref = SimpleUploadedFile("ref.png", PNG, "image/png")
    response = post_video(api(member), input_reference=ref)
    assert response.status_code == 200, response.content
    assert Job.objects.get().params["files"]["start_image"].endswith("inputs/start_image.png")


def test_a_refused_size_or_length_is_a_400_naming_the_param(member, device):
    client = api(member)
    err = error_of(post_video(client, size="1280x720"), 400)
    assert err["param"] == "size" and "832x480" in err["message"]
    err = error_of(post_video(client, seconds="8"), 400)
    assert err["param"] == "seconds"
    err = error_of(post_video(client, seconds="four"), 400)
    assert err["param"] == "seconds"
    err = error_of(post_video(client, model="sora-2"), 400)
    assert err["param"] == "model" and VIDEO in err["message"]
    err = error_of(post_video(client, quality="hd"), 400)
    assert err["param"] == "quality"
    assert not Job.objects.exists()


def test_a_render_over_the_device_limit_is_refused_at_submit(member, device):
    err = error_of(post_video(api(member), size="1344x768", seconds="7", steps="8"), 400)
    assert "minutes" in err["message"]
    assert not Job.objects.exists()


def test_the_same_idempotency_key_answers_with_the_same_video(member, device):
    client = api(member)
    first = post_video(client, headers={"Idempotency-Key": "run-42"}).json()
    again = post_video(client, headers={"Idempotency-Key": "run-42"}).json()
    assert first["id"] == again["id"] and Job.objects.count() == 1
    assert post_video(client, headers={"Idempotency-Key": "run-43"}).json()["id"] != first["id"]


def test_bad_json_and_unknown_devices_are_400s(member, device):
    client = api(member)
    err = error_of(client.post("/v1/videos", "{nope", content_type="application/json"), 400)
    assert err["code"] == "invalid_json"
    err = error_of(client.post("/v1/videos", "[1]", content_type="application/json"), 400)
    assert err["code"] == "invalid_json"
    err = error_of(post_video(client, device="Attic"), 400)
    assert err["param"] == "device" and "Pocket" in err["message"]
    err = error_of(client.post("/v1/videos", {"prompt": "x"}, HTTP_X_HUB_DEVICE="999"), 400)
    assert err["param"] == "device"
    assert post_video(client, device=str(device.pk)).status_code == 200
    assert post_video(client, device="pocket").status_code == 200  # names are matched case-insensitively


def test_retrieve_list_and_paging(member, other_member, device):
    mine = [make_job(member, device) for _ in range(5)]
    make_job(other_member, device, shared=True)  # others' videos are not in my list
    make_job(member, device, kind="image")  # nor my images
    client = api(member)
    first = client.get("/v1/videos", {"limit": 2}).json()
    assert first["object"] == "list" and first["has_more"] is True
    assert [v["id"] for v in first["data"]] == [f"video_{j.pk}" for j in mine[::-1][:2]]
    rest = client.get("/v1/videos", {"limit": 10, "after": first["last_id"]}).json()
    assert [v["id"] for v in rest["data"]] == [f"video_{j.pk}" for j in mine[::-1][2:]]
    assert rest["has_more"] is False
    asc = client.get("/v1/videos", {"order": "asc", "limit": 1}).json()
    assert asc["data"][0]["id"] == f"video_{mine[0].pk}"
    assert error_of(client.get("/v1/videos", {"limit": 0}), 400)["param"] == "limit"
    assert error_of(client.get("/v1/videos", {"order": "up"}), 400)["param"] == "order"
    assert error_of(client.get("/v1/videos", {"after": "x"}), 400)["param"] == "after"
    got = client.get(f"/v1/videos/video_{mine[0].pk}").json()
    assert got["id"] == f"video_{mine[0].pk}"


@pytest.mark.parametrize(
    ("state", "status"),
    [
        ("queued", "queued"),
        ("scheduled", "queued"),
        ("interrupted", "queued"),
        ("preparing", "in_progress"),
        ("running", "in_progress"),
        ("done", "completed"),
        ("failed", "failed"),
        ("cancelled", "failed"),
    ],
)
def test_job_states_map_to_openai_statuses(member, device, state, status):
    job = make_job(member, device, state=state, error_code="device_error", error_human="It broke.")
    video = api(member).get(f"/v1/videos/video_{job.pk}").json()
    assert video["status"] == status
    assert 0 <= video["progress"] <= 100
    if status == "failed":
        assert set(video["error"]) == {"code", "message"}
    if state in ("done", "failed", "cancelled"):
        assert video["completed_at"] == int(job.finished_at.timestamp())


def test_another_member_can_neither_see_nor_delete_my_video(member, other_member, device):
    job = make_job(member, device)
    other = api(other_member)
    assert error_of(other.get(f"/v1/videos/video_{job.pk}"), 404)["code"] == "not_found"
    assert error_of(other.get(f"/v1/videos/video_{job.pk}/content"), 404)
    assert error_of(other.delete(f"/v1/videos/video_{job.pk}"), 404)
    job.refresh_from_db()
    assert job.state == "queued"
    assert error_of(other.get("/v1/videos/video_999999"), 404)
    assert error_of(other.get("/v1/videos/nonsense"), 404)


def test_delete_cancels_a_queued_video_and_hides_a_finished_one(member, device, client):
    from jobs.core.selectors import jobs_visible_to

    queued = make_job(member, device)
    done = make_job(member, device, state="done")
    me = api(member)
    assert me.delete(f"/v1/videos/video_{queued.pk}").json() == {
        "id": f"video_{queued.pk}",
        "object": "video.deleted",
        "deleted": True,
    }
    queued.refresh_from_db()
    assert queued.state == "cancelled" and queued.hidden_at is None
    assert me.get(f"/v1/videos/video_{queued.pk}").json()["error"]["code"] == "cancelled"
    assert me.delete(f"/v1/videos/video_{done.pk}").json()["deleted"] is True
    done.refresh_from_db()
    assert done.hidden_at is not None and done.trashed_at is not None  # in the trash: restorable
    assert error_of(me.get(f"/v1/videos/video_{done.pk}"), 404)
    assert done not in jobs_visible_to(member)  # gone from the gallery and history too
    assert [v["id"] for v in me.get("/v1/videos").json()["data"]] == [f"video_{queued.pk}"]


def test_download_the_mp4_and_a_thumbnail(member, device, media):
    from devices.emulator import media as emu_media

    job = make_job(member, device, state="done")
    mp4 = emu_media.video_mp4(prompt="x", seconds=1, width=64, height=48, fps=8, audio=False).read_bytes()
    add_artifact(job, media, data=mp4)
    me = api(member)
    response = me.get(f"/v1/videos/video_{job.pk}/content")
    assert response.status_code == 200 and response["Content-Type"] == "video/mp4"
    assert b"".join(response.streaming_content)[4:8] == b"ftyp"
    thumb = me.get(f"/v1/videos/video_{job.pk}/content", {"variant": "thumbnail"})
    assert thumb.status_code == 200 and thumb["Content-Type"] == "image/jpeg"
    assert b"".join(thumb.streaming_content)[:3] == b"\xff\xd8\xff"
    assert (
        error_of(me.get(f"/v1/videos/video_{job.pk}/content", {"variant": "spritesheet"}), 400)["param"]
        == "variant"
    )


def test_download_of_an_unfinished_video_is_a_clear_400(member, device):
    job = make_job(member, device, state="running")
    err = error_of(api(member).get(f"/v1/videos/video_{job.pk}/content"), 400)
    assert err["code"] == "video_not_ready" and "in_progress" in err["message"]


def test_submissions_over_the_rate_get_a_429_with_retry_after(member, device, settings, monkeypatch):
    import uuid

    import hub.ratelimit

    settings.HUB_API_SUBMIT_RATE = "2/h"
    key = f"test:{uuid.uuid4()}"
    monkeypatch.setattr(hub.ratelimit, "rate_key", lambda request: key)
    client = api(member)
    assert post_video(client).status_code == 200
    assert post_video(client).status_code == 200
    response = post_video(client)
    err = error_of(response, 429)
    assert err["code"] == "rate_limit_exceeded" and int(response["Retry-After"]) >= 1
    assert Job.objects.count() == 2


def test_a_json_input_reference_may_be_a_data_url(member, device, media):
    data_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    body = {
        "model": VIDEO,
        "prompt": "p",
        "size": "832x480",
        "seconds": 2,
        "input_reference": {"image_url": data_url},
    }
    response = api(member).post("/v1/videos", json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content
    assert "start_image" in Job.objects.get().params["files"]
    body["input_reference"] = {"image_url": "https://example.com/a.png"}
    err = error_of(api(member).post("/v1/videos", json.dumps(body), content_type="application/json"), 400)
    assert err["param"] == "input_reference"


@pytest.fixture
def ts_device(db):
    from devices.capabilities import Capabilities, ModelCap, TensorSharpCap, VideoCap
    from devices.models import Device

    caps = Capabilities(
        kind="tensorsharp",
        models=[ModelCap("h3.gguf", "h3.gguf", "video", loaded=True)],
        tensorsharp=TensorSharpCap(
            architecture="minimax-h3",
            loaded="h3.gguf",
            frame_grid="17k+5",
            fps=24,
            max_cfg=1.0,
            video={"family": "minimax-h3", "supportsAudio": True, "supportsImageConditioning": False},
        ),
        video={"h3.gguf": VideoCap("h3.gguf", [], list(range(4, 21)), 20, 24, max_seconds=7)},
    )
    return Device.objects.create(
        name="Studio PC",
        kind="tensorsharp",
        base_url="http://127.0.0.1:1",
        state="online",
        capabilities=caps.to_dict(),
    )


def test_on_a_tensorsharp_server_size_and_seconds_become_pixels_and_frames(member, device, ts_device):
    client = api(member)
    response = post_video(
        client, model="h3.gguf", size="640x384", seconds="2", headers={"X-Hub-Device": "Studio PC"}
    )
    assert response.status_code == 200, response.content
    job = Job.objects.get()
    assert job.device == ts_device
    assert (job.params["width"], job.params["height"], job.params["steps"]) == (640, 384, 20)
    assert job.params["frames"] == 56  # 2 s at 24 fps, snapped to the 17k+5 grid
    assert (response.json()["size"], response.json()["seconds"]) == ("640x384", "2")
    err = error_of(post_video(client, model="h3.gguf", size="650x384", device="Studio PC"), 400)
    assert err["param"] == "size" and "32" in err["message"]
    err = error_of(post_video(client, model="h3.gguf", size="640x384", seconds="9", device="Studio PC"), 400)
    assert err["param"] == "seconds"
    from django.core.files.uploadedfile import SimpleUploadedFile

    ref = SimpleUploadedFile("r.png", PNG, "image/png")
    err = error_of(post_video(client, model="h3.gguf", input_reference=ref, device="Studio PC"), 400)
    assert err["param"] == "input_reference"
    err = error_of(
        client.post(
            "/v1/images/generations", {"prompt": "p", "device": "Studio PC"}, content_type="application/json"
        ),
        400,
    )
    assert err["param"] == "model" and "cannot make one" in err["message"]


# -- images and speech: the call waits for the job -----------------------------------------------------------


@pytest.fixture
def worker_finishes(monkeypatch, media):
    """Play the worker between two polls of the waiting view: the job is done and its files are saved."""
    from jobs.doors.v1 import waiting

    def finish(files):
        async def tick():
            from asgiref.sync import sync_to_async

            def done():
                job = Job.objects.order_by("-pk").first()
                for kind, name, mime, data in files:
                    add_artifact(job, media, kind=kind, name=name, mime=mime, data=data)
                Job.objects.filter(pk=job.pk).update(state="done", progress=100)

            await sync_to_async(done)()

        monkeypatch.setattr(waiting, "_tick", tick)

    return finish


def test_an_image_call_waits_for_its_job_and_returns_b64(member, device, worker_finishes):
    worker_finishes([("image", "image-1.png", "image/png", PNG), ("image", "image-2.png", "image/png", PNG)])
    response = api(member).post(
        "/v1/images/generations",
        {"model": IMAGE, "prompt": "a lighthouse", "size": "512x512", "n": 2, "response_format": "b64_json"},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert [base64.b64decode(d["b64_json"]) for d in body["data"]] == [PNG, PNG]
    job = Job.objects.get()
    assert job.params["n"] == 2 and job.params["size"] == "512x512"  # n images, one job
    assert response["X-Hub-Job"] == str(job.pk)


def test_an_image_url_is_a_hub_url_only_its_viewers_can_fetch(member, other_member, device, worker_finishes):
    worker_finishes([("image", "image-1.png", "image/png", PNG)])
    body = (
        api(member)
        .post(
            "/v1/images/generations",
            {"model": IMAGE, "prompt": "a lighthouse", "size": "512x512", "response_format": "url"},
            content_type="application/json",
        )
        .json()
    )
    url = body["data"][0]["url"]
    assert url.startswith("http://testserver/v1/files/")
    got = api(member).get(url.removeprefix("http://testserver"))
    assert got.status_code == 200 and b"".join(got.streaming_content) == PNG
    assert api(other_member).get(url.removeprefix("http://testserver")).status_code == 404


def test_the_wait_has_a_limit_and_then_names_the_job(member, device, settings, monkeypatch):
    from jobs.doors.v1 import waiting

    settings.HUB_V1_WAIT_S = 1.0
    monkeypatch.setattr(waiting, "POLL_S", 0.05)
    response = api(member).post(
        "/v1/images/generations",
        {"model": IMAGE, "prompt": "p", "size": "512x512"},
        content_type="application/json",
    )
    err = error_of(response, 504)
    job = Job.objects.get()
    assert err["code"] == "wait_timeout" and f"Job {job.pk}" in err["message"]
    assert f"/api/jobs/{job.pk}" in err["message"]
    assert response["x-should-retry"] == "false"  # the SDK must not queue it again
    assert job.state == "queued"  # an ordinary job: it still runs


def test_an_sdk_retry_waits_on_the_job_the_first_try_queued(member, device, settings, monkeypatch):
    from jobs.doors.v1 import waiting

    settings.HUB_V1_WAIT_S = 0.2
    monkeypatch.setattr(waiting, "POLL_S", 0.05)
    client = api(member)
    body = {"model": IMAGE, "prompt": "p", "size": "512x512"}
    client.post("/v1/images/generations", body, content_type="application/json")
    client.post(
        "/v1/images/generations", body, content_type="application/json", HTTP_X_STAINLESS_RETRY_COUNT="1"
    )
    assert Job.objects.count() == 1
    client.post("/v1/images/generations", body, content_type="application/json")  # a new call is a new job
    assert Job.objects.count() == 2


def test_image_refusals(member, device):
    client = api(member)
    post = lambda **b: client.post(  # noqa: E731
        "/v1/images/generations", {"model": IMAGE, "prompt": "p", **b}, content_type="application/json"
    )
    assert error_of(post(size="500x500"), 400)["param"] == "size"
    assert error_of(post(size="big"), 400)["param"] == "size"
    assert error_of(post(n=20), 400)["param"] == "n"
    assert error_of(post(response_format="webp"), 400)["param"] == "response_format"
    assert error_of(post(model=VIDEO), 400)["param"] == "model"
    assert not Job.objects.exists()


def test_speech_returns_the_audio_with_its_type(member, device, worker_finishes):
    worker_finishes([("audio", "speech.wav", "audio/wav", b"RIFF\x00\x00\x00\x00WAVEfmt ")])
    response = api(member).post(
        "/v1/audio/speech",
        {"model": TTS, "voice": "serena", "input": "Hello.", "response_format": "wav"},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "audio/wav" and response.content.startswith(b"RIFF")
    assert Job.objects.get().params == {"input": "Hello.", "response_format": "wav", "voice": "serena"}


def test_a_voice_the_model_lacks_is_refused_with_the_valid_ones(member, device):
    err = error_of(
        api(member).post(
            "/v1/audio/speech",
            {"model": TTS, "voice": "alloy", "input": "Hello.", "response_format": "wav"},
            content_type="application/json",
        ),
        400,
    )
    assert err["param"] == "voice" and "serena" in err["message"] and "vivian" in err["message"]
    assert not Job.objects.exists()


# -- models and the rest -------------------------------------------------------------------------------------


def test_models_lists_what_the_hub_can_queue_with_kinds(member, device):
    client = api(member, scopes=("read",))
    body = client.get("/v1/models").json()
    assert body["object"] == "list"
    kinds = {m["id"]: m["kind"] for m in body["data"]}
    assert kinds[VIDEO] == "video" and kinds[IMAGE] == "image" and kinds[TTS] == "speech"
    assert all(m["object"] == "model" and isinstance(m["created"], int) for m in body["data"])
    one = client.get(f"/v1/models/{VIDEO}").json()
    assert one["id"] == VIDEO and one["owned_by"] == "MiniMaxAI"
    assert client.get("/v1/models/MiniMaxAI%2FMiniMax-H3-Turbo").json()["id"] == VIDEO
    assert error_of(client.get("/v1/models/gpt-4o"), 404)


def test_unknown_routes_and_methods_answer_in_openai_shape(member, device):
    client = api(member)
    assert error_of(client.get("/v1/chat/completions"), 404)["code"] == "not_found"
    assert error_of(client.put("/v1/videos"), 405)["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    "url",
    [
        "/v1/videos?limit=²",
        "/v1/videos?limit=" + "9" * 5000,
        "/v1/videos?after=video_²",
        "/v1/videos?after=video_" + "9" * 5000,
        "/v1/videos/video_²",
        "/v1/videos/video_" + "9" * 5000,
    ],
)
def test_odd_numbers_in_ids_and_limits_are_a_4xx_never_a_500(member, device, url):
    response = api(member).get(url)
    assert 400 <= response.status_code < 500
    assert "error" in response.json()
