"""TensorSharp.Server.Host emulator over real HTTP: the three video routes, their rules and the render lock."""

from __future__ import annotations

import base64
import json
import pathlib
import re
import threading
import time
import wave
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from io import BytesIO
from typing import Any

import httpx
import imageio_ffmpeg
import pytest

from devices.emulator import media
from devices.emulator.testing import RunningEmulator, run_tensorsharp

pytestmark = pytest.mark.integration

VIDEO_URL = re.compile(r"^/uploads/video-[0-9a-f]{32}\.mp4$")
H3_FAST = {"prompt": "a red fox trotting through falling snow", "width": 320, "height": 192, "steps": 4}


@pytest.fixture(scope="module")
def h3() -> Iterator[RunningEmulator]:
    with run_tensorsharp(model="minimax-h3", speed=600) as emulator:
        yield emulator


@pytest.fixture(scope="module")
def wan() -> Iterator[RunningEmulator]:
    with run_tensorsharp(model="wan", speed=3000) as emulator:
        yield emulator


@pytest.fixture
def client(h3: RunningEmulator) -> Iterator[httpx.Client]:
    h3.reset_counters()
    with httpx.Client(base_url=h3.base_url, timeout=30) as c:
        yield c


def sse_frames(resp: httpx.Response) -> list[dict[str, Any]]:
    """Every SSE frame must be exactly `data: <json>\\n\\n`; returns the decoded JSON objects."""
    text = resp.text
    assert text.endswith("\n\n")
    frames = []
    for chunk in text.split("\n\n")[:-1]:
        assert chunk.startswith("data: "), chunk
        payload = chunk[len("data: ") :]
        assert payload != "[DONE]"  # TensorSharp sends no sentinel
        frames.append(json.loads(payload))
    return frames


def _upload(client: httpx.Client, name: str = "first.png") -> str:
    data = media.png_bytes(prompt="frame", width=128, height=72)
    return client.post("/api/upload", files={"file": (name, data, "image/png")}).json()["file"]


# ---- /api/video-generate ----------------------------------------------------------------------------------


def test_h3_generate_snaps_and_returns_mp4_plus_wav_sidecar(client: httpx.Client) -> None:
    body = {**H3_FAST, "width": 600, "height": 380, "frames": 30, "fps": 30, "cfg": 1.0, "seed": 42}
    resp = client.post("/api/video-generate", json=body)
    assert resp.status_code == 200
    result = resp.json()
    assert set(result) == {"ok", "url", "audioUrl", "width", "height", "frames", "fps", "seed", "codec",
                           "elapsedSeconds"}  # fmt: skip
    assert result["ok"] is True and result["codec"] == "h264" and result["seed"] == 42
    # 17k+5 frames, sizes rounded up to a multiple of 32, fps pinned to 24.
    assert (result["width"], result["height"], result["frames"], result["fps"]) == (608, 384, 22, 24)
    assert isinstance(result["elapsedSeconds"], float) and result["elapsedSeconds"] > 0
    assert VIDEO_URL.match(result["url"])
    assert result["audioUrl"] == result["url"][: -len(".mp4")] + ".wav"

    mp4 = client.get(result["url"]).content
    assert mp4[4:8] == b"ftyp" and b"avc1" in mp4
    assert b"mp4a" not in mp4  # the soundtrack is never muxed into the MP4
    with wave.open(BytesIO(client.get(result["audioUrl"]).content)) as wav:
        assert (wav.getframerate(), wav.getnchannels()) == (32000, 2)
        assert abs(wav.getnframes() / 32000 - 22 / 24) < 0.01


def test_h3_generate_audio_false_has_no_audio_url(client: httpx.Client) -> None:
    result = client.post("/api/video-generate", json={**H3_FAST, "generate_audio": False}).json()
    assert result["audioUrl"] is None
    # camelCase wins over snake_case when both are given.
    both = {**H3_FAST, "generateAudio": True, "generate_audio": False}
    assert client.post("/api/video-generate", json=both).json()["audioUrl"] is not None


def test_h3_defaults_and_random_seed(client: httpx.Client) -> None:
    result = client.post("/api/video-generate", json={"prompt": "defaults", "seed": 0}).json()
    assert (result["width"], result["height"], result["frames"], result["fps"]) == (640, 384, 22, 24)
    assert result["seed"] != 0  # seed 0 is ignored: a random seed is used and reported


@pytest.mark.parametrize(("frames", "snapped"), [(1, 5), (5, 5), (13, 5), (14, 22), (81, 73), (90, 90)])
def test_h3_frame_grid(client: httpx.Client, frames: int, snapped: int) -> None:
    resp = client.post("/api/video-generate", json={**H3_FAST, "frames": frames, "generateAudio": False})
    assert resp.json()["frames"] == snapped


def test_h3_refuses_cfg_above_one(client: httpx.Client) -> None:
    resp = client.post("/api/video-generate", json={**H3_FAST, "cfg": 5.0})
    assert resp.status_code == 400
    assert set(resp.json()) == {"error"} and "1.0" in resp.json()["error"]
    assert client.get("/__emulator__/counters").json()["renders_submitted"] == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"prompt": "  "}, "prompt is required."),
        ({"imagePath": "nope.png"}, "imagePath must reference a previously uploaded file."),
        ({"imagePath": "../../etc/passwd"}, "imagePath must reference a previously uploaded file."),
        ({"image": "%%%not-base64%%%"}, "image must be base64-encoded (optionally a data: URL)."),
        ({"endImage": "nope.png"}, "endImage must reference a previously uploaded file."),
        (
            {"referenceImages": ["nope.png"]},
            "referenceImages entries must reference previously uploaded files.",
        ),
    ],
)
def test_parser_errors(client: httpx.Client, extra: dict[str, Any], message: str) -> None:
    resp = client.post("/api/video-generate", json={**H3_FAST, **extra})
    assert resp.status_code == 400 and resp.json() == {"error": message}


def test_malformed_json_is_the_middlewares_400(client: httpx.Client) -> None:
    resp = client.post("/api/video-generate", content=b"{nope", headers={"content-type": "application/json"})
    assert resp.status_code == 400
    assert resp.json()["error"].startswith("Could not read the request body: ")


def test_fl2v_with_uploaded_frames_and_ref_mode_refused(client: httpx.Client) -> None:
    first, last = _upload(client), _upload(client, "last.png")
    body = {**H3_FAST, "imagePath": first, "endImage": last, "videoMode": "fl2v", "generateAudio": False}
    assert client.post("/api/video-generate", json=body).status_code == 200
    # The FL2VA checkpoint explains that reference conditioning needs another file.
    resp = client.post("/api/video-generate", json={**H3_FAST, "referenceImages": [first]})
    assert resp.status_code == 400 and "Ref2VA" in resp.json()["error"]


def test_inline_base64_image_is_accepted(client: httpx.Client) -> None:
    png = media.png_bytes(prompt="x", width=64, height=64)
    data_url = "data:image/png;base64," + base64.b64encode(png).decode()
    body = {**H3_FAST, "image": data_url, "generateAudio": False}
    assert client.post("/api/video-generate", json=body).json()["ok"] is True


# ---- /api/video-generate/stream ---------------------------------------------------------------------------


def test_stream_phase_order_and_final_frame(client: httpx.Client) -> None:
    first = _upload(client)
    with client.stream("POST", "/api/video-generate/stream", json={**H3_FAST, "imagePath": first}) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        assert resp.headers["cache-control"] == "no-cache"
        resp.read()
    frames = sse_frames(resp)
    ticks, final = frames[:-1], frames[-1]
    for tick in ticks:
        assert set(tick) == {"videoGen", "step", "total", "phase", "detail", "elapsedSeconds", "etaSeconds"}
        assert tick["videoGen"] is True and tick["total"] == 4
    phases = [t["phase"] for t in ticks]
    order = list(dict.fromkeys(phases))
    assert order == ["text-encode", "image-encode", "denoise", "vae-decode", "audio-decode", "done"]
    steps = [
        t["step"] for t in ticks if t["phase"] == "denoise" and t["detail"] and t["detail"].startswith("step")
    ]
    assert {1, 2, 3, 4} <= set(steps)
    assert final["done"] is True and VIDEO_URL.match(final["url"]) and final["audioUrl"].endswith(".wav")
    assert (final["width"], final["height"], final["frames"], final["fps"], final["codec"]) == (
        320, 192, 22, 24, "h264",
    )  # fmt: skip
    elapsed = [t["elapsedSeconds"] for t in ticks]
    assert elapsed == sorted(elapsed)


def test_stream_has_heartbeat_ticks_when_steps_are_long(h3: RunningEmulator, client: httpx.Client) -> None:
    # At speed 60 a 640x384x22 step takes ~6.6 device s = 0.11 wall s: heartbeats (every ~2 device s) appear.
    h3.set_speed(60)
    try:
        body = {**H3_FAST, "width": 640, "height": 384, "steps": 2, "generateAudio": False}
        frames = sse_frames(client.post("/api/video-generate/stream", json=body))
    finally:
        h3.set_speed(600)
    denoise = [f for f in frames[:-1] if f["phase"] == "denoise"]
    assert len(denoise) > 1 + 2  # the phase change + one per step + heartbeats
    assert all(f["etaSeconds"] >= 0 for f in denoise)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"prompt": ""}', "prompt is required."),
        (b'{"prompt": "x", "cfg": 2}', None),
        (b"{broken", "Bad request: "),
    ],
)
def test_stream_errors_are_frames_on_a_200(client: httpx.Client, body: bytes, message: str | None) -> None:
    resp = client.post(
        "/api/video-generate/stream", content=body, headers={"content-type": "application/json"}
    )
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
    frames = sse_frames(resp)
    assert len(frames) == 1 and set(frames[0]) == {"done", "error"} and frames[0]["done"] is True
    assert frames[0]["error"].startswith(message) if message else "CFG" in frames[0]["error"]


# ---- /v1/videos/generations -------------------------------------------------------------------------------


def test_openai_route_shape(client: httpx.Client) -> None:
    resp = client.post(
        "/v1/videos/generations", json={"prompt": "a lovely cat", "size": "320x192", "steps": 2, "seed": 7}
    )
    assert resp.status_code == 200
    body = resp.json()
    assert set(body) == {"created", "data", "audio_url", "width", "height", "frames", "fps", "seed", "codec",
                         "elapsed_seconds"}  # fmt: skip
    assert body["data"] == [{"url": body["data"][0]["url"], "b64_json": None}]
    assert VIDEO_URL.match(body["data"][0]["url"]) and body["audio_url"].endswith(".wav")
    assert (body["width"], body["height"], body["seed"]) == (320, 192, 7)
    assert isinstance(body["created"], int)


def test_openai_route_b64_json(client: httpx.Client) -> None:
    body = {"prompt": "b64", "size": "320x192", "steps": 2, "response_format": "b64_json"}
    item = client.post("/v1/videos/generations", json=body).json()["data"][0]
    assert base64.b64decode(item["b64_json"])[4:8] == b"ftyp"


def test_openai_route_errors(client: httpx.Client) -> None:
    resp = client.post("/v1/videos/generations", json={"prompt": ""})
    assert resp.status_code == 400
    assert resp.json() == {"error": {"message": "prompt is required.", "type": "invalid_request_error"}}
    # Model-side refusals are not caught by this route: the middleware turns them into a generic 500.
    resp = client.post("/v1/videos/generations", json={"prompt": "x", "cfg": 4})
    assert resp.status_code == 500
    assert resp.json() == {
        "error": {"message": "The server failed to handle the request.", "type": "internal_error"}
    }


# ---- Wan ----------------------------------------------------------------------------------------------------


def test_wan_defaults_grid_and_no_audio(wan: RunningEmulator, tmp_path: pathlib.Path) -> None:
    with httpx.Client(base_url=wan.base_url, timeout=30) as client:
        small = {"prompt": "a lovely cat", "width": 320, "height": 192, "steps": 2}
        result = client.post("/api/video-generate", json=small).json()
        assert (result["frames"], result["fps"], result["audioUrl"]) == (49, 24, None)
        snapped = client.post("/api/video-generate", json={**small, "frames": 80, "cfg": 5.0}).json()
        assert snapped["frames"] == 81  # 4k+1; Wan takes cfg > 1
        mp4 = client.get(result["url"]).content
        assert b"mp4a" not in mp4
        (tmp_path / "wan.mp4").write_bytes(mp4)
        assert imageio_ffmpeg.count_frames_and_secs(str(tmp_path / "wan.mp4"))[0] == 49
        frames = sse_frames(client.post("/api/video-generate/stream", json=small))
    plain = [f for f in frames[:-1] if f["phase"] is None]
    # Wan's step ticks come from the plain step callback: documented defaults.
    assert plain and all(
        f["detail"] is None and f["elapsedSeconds"] == 0 and f["etaSeconds"] == -1 for f in plain
    )
    assert [f["step"] for f in plain] == [1, 2]
    assert [f["phase"] for f in frames[:-1] if f["phase"]][-1] == "done"
    assert "audio-decode" not in {f["phase"] for f in frames[:-1]}


def test_non_video_model_is_refused_everywhere() -> None:
    message = "The loaded model is not a video-generation model."
    with (
        run_tensorsharp(model="qwen-image-edit") as emulator,
        httpx.Client(base_url=emulator.base_url) as client,
    ):
        resp = client.post("/api/video-generate", json={"prompt": "x"})
        assert resp.status_code == 400 and resp.json() == {"error": message}
        resp = client.post("/v1/videos/generations", json={"prompt": "x"})
        assert resp.status_code == 400
        assert resp.json() == {"error": {"message": message, "type": "invalid_request_error"}}
        resp = client.post("/api/video-generate/stream", json={"prompt": "x"})
        assert resp.status_code == 200 and sse_frames(resp) == [{"done": True, "error": message}]


# ---- lock and cancellation --------------------------------------------------------------------------------


def test_two_generations_are_serialized_not_refused(h3: RunningEmulator, client: httpx.Client) -> None:
    # ~143 device s each at speed 300 = ~0.5 s wall; together they must take about twice that.
    h3.set_speed(300)
    body = {"prompt": "serial", "width": 640, "height": 384, "steps": 20, "generateAudio": False}
    try:
        started = time.monotonic()
        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(httpx.post, h3.base_url + "/api/video-generate", json=body, timeout=30)]
            time.sleep(0.1)
            # While one render holds the lock, the chat queue still reports idle: video work is invisible there.
            assert client.get("/api/queue/status").json()["processing"] == 0
            futures.append(pool.submit(httpx.post, h3.base_url + "/api/video-generate/stream", json=body,
                                       timeout=30))  # fmt: skip
            results = [f.result() for f in futures]
        wall = time.monotonic() - started
    finally:
        h3.set_speed(600)
    assert results[0].json()["ok"] is True and sse_frames(results[1])[-1]["done"] is True
    counters = h3.counters()
    assert counters["renders_submitted"] == 2 and counters["renders_completed"] == 2
    assert counters["peak_concurrent_work"] == 1 and counters["current_work"] == 0
    assert wall >= 0.8


def _wait_for(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_client_disconnect_cancels_the_render(h3: RunningEmulator, client: httpx.Client) -> None:
    h3.set_speed(5)  # a 640x384 20-step render now takes ~30 s wall: it can only end by cancellation
    body = {"prompt": "abandoned", "width": 640, "height": 384, "steps": 20}
    try:
        with client.stream("POST", "/api/video-generate/stream", json=body) as resp:
            lines = resp.iter_lines()
            first = next(line for line in lines if line.startswith("data: "))
            assert json.loads(first[6:])["phase"] == "text-encode"
            _wait_for(lambda: h3.counters()["current_work"] == 1)
        # Leaving the block closed the connection mid-render.
        _wait_for(lambda: h3.counters()["renders_cancelled"] == 1)
        assert h3.counters()["current_work"] == 0
    finally:
        h3.set_speed(600)
    # The lock is free: the next render runs straight away.
    resp = client.post("/api/video-generate", json={**H3_FAST, "generateAudio": False}, timeout=10)
    assert resp.json()["ok"] is True
    counters = h3.counters()
    assert (counters["renders_submitted"], counters["renders_completed"], counters["renders_cancelled"]) == (
        2,
        1,
        1,
    )


def test_blocking_request_disconnect_cancels_too(h3: RunningEmulator) -> None:
    h3.reset_counters()
    h3.set_speed(5)
    try:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(h3.base_url + "/api/video-generate", json={"prompt": "gone", "steps": 20}, timeout=0.5)
        _wait_for(lambda: h3.counters()["renders_cancelled"] == 1)
        assert h3.counters()["current_work"] == 0
    finally:
        h3.set_speed(600)


def test_waiting_caller_blocks_then_runs_after_cancelled_holder(h3: RunningEmulator) -> None:
    """A caller queued behind a render that gets abandoned still completes (the lock is handed over)."""
    h3.reset_counters()
    h3.set_speed(5)
    results: list[httpx.Response] = []

    def second() -> None:
        results.append(
            httpx.post(h3.base_url + "/api/video-generate", json={**H3_FAST, "steps": 1}, timeout=30)
        )

    try:
        with httpx.Client(base_url=h3.base_url, timeout=30) as holder:
            with holder.stream(
                "POST", "/api/video-generate/stream", json={"prompt": "holder", "steps": 20}
            ) as r:
                lines = r.iter_lines()  # keep the iterator alive: dropping it closes the connection
                next(lines)
                thread = threading.Thread(target=second)
                thread.start()
                _wait_for(lambda: h3.counters()["renders_submitted"] == 2)
                assert not results  # blocked, not refused
                h3.set_speed(600)
        thread.join(timeout=10)
    finally:
        h3.set_speed(600)
    assert results and results[0].json()["ok"] is True
    counters = h3.counters()
    assert counters["renders_cancelled"] == 1 and counters["renders_completed"] == 1
    assert counters["peak_concurrent_work"] == 1


def test_reset_cancels_a_running_render(h3: RunningEmulator, client: httpx.Client) -> None:
    h3.set_speed(5)
    with client.stream(
        "POST", "/api/video-generate/stream", json={"prompt": "reset me", "steps": 20}
    ) as resp:
        lines = resp.iter_lines()  # keep the iterator alive: dropping it closes the connection
        next(lines)
        _wait_for(lambda: h3.counters()["current_work"] == 1)
        h3.reset()  # also restores the start-up speed (600)
        frames = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    assert all("done" not in f for f in frames)  # the stream ended, with no final frame
    assert h3.counters()["current_work"] == 0
    assert client.post("/api/video-generate", json={**H3_FAST, "steps": 1}, timeout=10).json()["ok"] is True


def test_shared_fixture_gives_a_fresh_emulator(tensorsharp: RunningEmulator) -> None:
    counters = tensorsharp.counters()
    assert counters["requests"] == {} and counters["renders_submitted"] == 0
    assert httpx.get(tensorsharp.base_url + "/api/models").json()["architecture"] == "minimax-h3"
