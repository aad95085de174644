"""The official ``openai`` SDK, unchanged, against a live hub: the web server, a real Celery worker, Redis, and the
Tiiny emulator over HTTP. ``base_url`` is ``<hub>/v1`` and the key is a personal hub token.

The worker is the engine tests' one (``engine``: short poll and load-grace intervals), not the session's
``live_worker``, whose production intervals (10 s grace after every model load) would make each test slow.
"""

from __future__ import annotations

import threading
import time

import openai
import pytest

from jobs.models import Job
from jobs.tests.conftest import make_device

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"
IMAGE = "Tongyi-MAI/Z-Image-Turbo"
TTS = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"


@pytest.fixture
def pocket(tiiny, transactional_db):
    return make_device(tiiny)


@pytest.fixture
def client(engine, live_server_asgi, pocket, member):
    from hub.accounts.tokens import token_create

    _token, raw = token_create(user=member, name="laptop", scopes=["read", "submit"])
    # No SDK retries: a test must see the hub's first answer.
    with openai.OpenAI(
        base_url=live_server_asgi.extra["url"] + "/v1", api_key=raw, max_retries=0, timeout=60
    ) as sdk:
        yield sdk


def job_of(video) -> Job:
    return Job.objects.get(pk=int(video.id.removeprefix("video_")))


def test_create_poll_and_download_a_playable_mp4(client, member):
    video = client.videos.create(model=VIDEO, prompt="a red fox in the snow", size="832x480", seconds="2")
    assert (video.object, video.size, video.seconds) == ("video", "832x480", "2")
    assert video.status in ("queued", "in_progress")  # the fast worker may have taken it already
    deadline = time.monotonic() + 30
    while video.status in ("queued", "in_progress") and time.monotonic() < deadline:
        time.sleep(0.3)
        video = client.videos.retrieve(video.id)
        assert 0 <= video.progress <= 100
    assert video.status == "completed", video
    assert video.progress == 100 and video.completed_at >= video.created_at
    mp4 = client.videos.download_content(video.id).content
    assert mp4[4:8] == b"ftyp" and len(mp4) > 1000
    still = client.videos.download_content(video.id, variant="thumbnail").content
    assert still[:3] == b"\xff\xd8\xff"
    # An ordinary job: in the owner's gallery and history.
    from jobs.core.selectors import jobs_visible_to

    assert job_of(video) in jobs_visible_to(member)


def test_create_and_poll(client):
    video = client.videos.create_and_poll(
        model=VIDEO, prompt="waves at dusk", size="480x832", seconds="2", poll_interval_ms=200
    )
    assert video.status == "completed" and video.error is None
    assert job_of(video).artifacts.exclude(kind="thumb").get().name == "video.mp4"


def test_list_pages_through_my_videos_and_delete_cancels_a_queued_one(client, pocket):
    from devices.models import Device

    Device.objects.filter(pk=pocket.pk).update(queue_paused=True)  # nothing starts: they stay queued
    made = [
        client.videos.create(model=VIDEO, prompt=f"clip {i}", size="832x480", seconds="1") for i in range(3)
    ]
    page = client.videos.list(limit=2)
    assert [v.id for v in page.data] == [made[2].id, made[1].id] and page.has_more
    assert [v.id for v in client.videos.list(limit=2)] == [
        v.id for v in made[::-1]
    ]  # the SDK follows `after`
    assert [v.id for v in client.videos.list(order="asc", limit=5).data] == [v.id for v in made]

    gone = client.videos.delete(made[0].id)
    assert (gone.id, gone.object, gone.deleted) == (made[0].id, "video.deleted", True)
    after = client.videos.retrieve(made[0].id)
    assert after.status == "failed" and after.error.code == "cancelled"
    assert job_of(made[0]).state == "cancelled"


def test_a_refused_size_is_answered_in_openais_error_shape(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.videos.create(model=VIDEO, prompt="p", size="1280x720", seconds="2")
    assert caught.value.param == "size" and "832x480" in caught.value.message
    assert caught.value.type == "invalid_request_error"
    with pytest.raises(openai.BadRequestError) as caught:
        client.videos.create(model=VIDEO, prompt="p", size="832x480", seconds="8")
    assert caught.value.param == "seconds"
    assert not Job.objects.exists()


def test_a_preset_through_extra_body_fills_what_the_call_leaves_out(client, pocket, member, other_member):
    from devices.models import Device
    from jobs.queue.presets import preset_create

    Device.objects.filter(pk=pocket.pk).update(queue_paused=True)  # nothing starts: it stays queued
    preset_create(
        by=member, kind="video", name="tall", values={"model": VIDEO, "size": "480x832", "seconds": 2}
    )
    preset_create(by=other_member, kind="video", name="otto's", values={"model": VIDEO})
    video = client.videos.create(prompt="a heron", extra_body={"preset": "tall"})
    assert (video.model, video.size, video.seconds) == (VIDEO, "480x832", "2")
    wide = client.videos.create(prompt="a heron", size="832x480", extra_body={"preset": "tall"})
    assert (wide.size, wide.seconds) == ("832x480", "2")  # the call's own size wins
    for name in ("nope", "otto's"):  # another person's preset is exactly like a missing one
        with pytest.raises(openai.BadRequestError) as caught:
            client.videos.create(prompt="p", extra_body={"preset": name})
        assert caught.value.param == "preset" and caught.value.code == "preset_not_found"
    assert Job.objects.count() == 2


def test_models_list_names_the_devices_own_models(client):
    models = {m.id: m.model_extra.get("kind") for m in client.models.list()}
    assert models[VIDEO] == "video" and models[IMAGE] == "image" and models[TTS] == "speech"
    assert client.models.retrieve(VIDEO).id == VIDEO


def test_an_image_and_a_speech_call_wait_their_turn_behind_a_running_video(client, tiiny):
    import base64

    tiiny.set_speed(100)  # 2 s @ 832x480, 4 steps = 420 device-seconds: ~4 s here
    video = client.videos.create(model=VIDEO, prompt="a slow pan", size="832x480", seconds="2")
    deadline = time.monotonic() + 20
    while client.videos.retrieve(video.id).status != "in_progress" and time.monotonic() < deadline:
        time.sleep(0.1)
    results: dict = {}

    def call(name, fn):
        try:
            results[name] = fn()
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            results[name] = exc

    calls = [
        threading.Thread(
            target=call,
            args=(
                "image",
                lambda: client.images.generate(model=IMAGE, prompt="a lighthouse", size="512x512", n=2),
            ),
        ),
        threading.Thread(
            target=call,
            args=(
                "speech",
                lambda: client.audio.speech.create(
                    model=TTS, voice="serena", input="Hello from the hub.", response_format="wav"
                ),
            ),
        ),
    ]
    for t in calls:
        t.start()
    for t in calls:
        t.join(timeout=50)
    image, speech = results["image"], results["speech"]
    assert not isinstance(image, Exception), image
    assert not isinstance(speech, Exception), speech
    assert len(image.data) == 2 and base64.b64decode(image.data[0].b64_json)[:8] == b"\x89PNG\r\n\x1a\n"
    assert speech.content[:4] == b"RIFF"

    rendered = job_of(video)
    assert rendered.state == "done"
    for kind in ("image", "speech"):
        job = Job.objects.get(kind=kind)
        # One lane: each started only after the video was done, and finished after it had started.
        assert job.finished_at > rendered.started_at
        assert job.started_at >= rendered.finished_at, (kind, job.started_at, rendered.finished_at)
    assert tiiny.counters()["peak_concurrent_work"] == 1
