"""Blocking inference routes on the Tiiny emulator: images, speech, music, 3D, chat, and their quirks."""

from __future__ import annotations

import base64
import io
import json
import struct
import threading
import time
import wave

import httpx

from .tiiny_helpers import (
    CHAT,
    CUSTOM_VOICE,
    FOUNDATION,
    HUNYUAN,
    MOSS,
    SONGGEN,
    SUPERTONIC,
    ZIMAGE,
    wait_for,
    wait_task,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _is_wav(data: bytes) -> bool:
    return data[:4] == b"RIFF" and data[8:12] == b"WAVE"


def _is_glb(data: bytes) -> bool:
    return data[:4] == b"glTF" and struct.unpack("<I", data[4:8])[0] == 2


def _is_mp3(data: bytes) -> bool:
    return data[:3] == b"ID3" or (data[0] == 0xFF and data[1] & 0xE0 == 0xE0)


# ----- images ----------------------------------------------------------------------------------------------


def test_it_generates_one_png_as_b64_json_or_url(tiiny):
    tiiny.load(ZIMAGE)
    with tiiny.client() as c:
        b64 = c.post(
            "/v1/images/generations",
            json={"model": ZIMAGE, "prompt": "a cat", "size": "512x512", "response_format": "b64_json"},
        )
        url = c.post(
            "/v1/images/generations",
            json={"model": ZIMAGE, "prompt": "a dog", "size": "768x512", "response_format": "url"},
        )
        png = c.get(url.json()["data"][0]["url"]).content
    assert b64.status_code == 200 and isinstance(b64.json()["created"], int)
    assert base64.b64decode(b64.json()["data"][0]["b64_json"]).startswith(PNG_MAGIC)
    assert png.startswith(PNG_MAGIC)
    assert tiiny.counters()["inferences"] == 2


def test_it_fails_more_than_one_image_per_request(tiiny):
    tiiny.load(ZIMAGE)
    with tiiny.client() as c:
        resp = c.post("/v1/images/generations", json={"prompt": "cats", "size": "512x512", "n": 2})
    assert resp.status_code == 500 and "one image per request" in resp.json()["error"]["message"]


def test_it_generates_several_images_with_single_image_off(tiiny):
    tiiny.disable_quirks("single_image")
    tiiny.load(ZIMAGE)
    with tiiny.client() as c:
        resp = c.post("/v1/images/generations", json={"prompt": "cats", "size": "512x512", "n": 2})
    assert resp.status_code == 200 and len(resp.json()["data"]) == 2


def test_it_answers_503_for_images_with_no_image_model(tiiny):
    with tiiny.client() as c:
        resp = c.post("/v1/images/generations", json={"prompt": "cats"})
    assert resp.status_code == 503 and resp.json()["error"]["type"] == "service_unavailable"


def test_it_holds_blocking_requests_for_device_time_one_at_a_time(tiiny):
    tiiny.load(ZIMAGE)
    tiiny.set_speed(20)  # 512x512 at 8 steps = 7.9 device-s = 0.4 s
    results: list[float] = []

    def one() -> None:
        with tiiny.client() as c:
            t0 = time.monotonic()
            c.post("/v1/images/generations", json={"prompt": "x", "size": "512x512", "steps": 8})
            results.append(time.monotonic() - t0)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert min(results) >= 0.38 and max(results) >= 0.7  # the second waited for the first
    assert tiiny.counters()["peak_concurrent_work"] == 2


# ----- speech ----------------------------------------------------------------------------------------------


def test_it_speaks_24khz_wav_with_one_of_the_models_speakers(tiiny):
    tiiny.load(CUSTOM_VOICE)
    with tiiny.client() as c:
        resp = c.post(
            "/v1/audio/speech",
            json={"model": CUSTOM_VOICE, "input": "Hello there, friend.", "voice": "serena"},
        )
        mp3 = c.post(
            "/v1/audio/speech",
            json={"model": CUSTOM_VOICE, "input": "Hi.", "voice": "ryan", "response_format": "mp3"},
        )
        alloy = c.post("/v1/audio/speech", json={"model": CUSTOM_VOICE, "input": "Hi.", "voice": "alloy"})
        short = c.post("/v1/audio/speech", json={"model": "tts-1", "input": "Hi.", "voice": "serena"})
    assert resp.status_code == 200 and resp.headers["content-type"] == "audio/wav" and _is_wav(resp.content)
    with wave.open(io.BytesIO(resp.content)) as w:
        assert w.getframerate() == 24000
    assert mp3.status_code == 200 and _is_mp3(mp3.content)
    assert alloy.status_code == 200  # CustomVoice falls back
    assert short.status_code == 404


def test_it_fails_tts_with_a_voice_the_model_does_not_have(tiiny):
    tiiny.load(MOSS)
    with tiiny.client() as c:
        bad = c.post("/v1/audio/speech", json={"model": MOSS, "input": "Hi.", "voice": "alloy"})
        good = c.post("/v1/audio/speech", json={"model": MOSS, "input": "Hi.", "voice": "default"})
    assert bad.status_code == 500 and bad.json()["error"]["message"] == "The upstream TTS model failed."
    assert good.status_code == 200


def test_it_accepts_any_voice_with_tts_voice_check_off(tiiny):
    tiiny.disable_quirks("tts_voice_check")
    tiiny.load(MOSS)
    with tiiny.client() as c:
        assert (
            c.post("/v1/audio/speech", json={"model": MOSS, "input": "Hi.", "voice": "alloy"}).status_code
            == 200
        )


def test_it_always_fails_supertonic_through_the_api(tiiny):
    tiiny.load(SUPERTONIC)
    with tiiny.client() as c:
        resp = c.post("/v1/audio/speech", json={"model": SUPERTONIC, "input": "Hi.", "voice": "F1"})
    assert resp.status_code == 500


def test_it_speaks_with_supertonic_when_supertonic_broken_is_off(tiiny):
    tiiny.disable_quirks("supertonic_broken")
    tiiny.load(SUPERTONIC)
    with tiiny.client() as c:
        resp = c.post("/v1/audio/speech", json={"model": SUPERTONIC, "input": "Hi.", "voice": "F1"})
    assert resp.status_code == 200 and _is_wav(resp.content)


# ----- music -----------------------------------------------------------------------------------------------


def test_it_makes_foundation_loops_as_wav_and_as_an_envelope(tiiny):
    tiiny.load(FOUNDATION)
    req = {
        "model": FOUNDATION,
        "prompt": "warm rhodes chords",
        "config": {"seconds_total": 2, "steps": 50, "cfg_scale": 7, "seed": 3},
    }
    with tiiny.client() as c:
        wav = c.post("/v1/music/generate/wav", json=req)
        env = c.post("/v1/music/generate", json=req).json()
        info = c.get("/v1/music/info").json()
    assert wav.status_code == 200 and _is_wav(wav.content)
    assert env["success"] is True and env["error"] is None and _is_wav(base64.b64decode(env["audio_data"]))
    assert env["sample_rate"] == 44100 and env["channels"] == 2 and env["duration"] == 2
    for key in (
        "audio_format",
        "audio_outputs",
        "error_code",
        "error_details",
        "metadata",
        "prompt",
        "sample_count",
        "session_id",
    ):
        assert key in env
    assert info["models"][0]["model_id"] == FOUNDATION


def test_it_answers_when_the_devices_work_ends_its_media_made_meanwhile(tiiny):
    """The device answers a blocking call when its inference ends. The emulator's media is real CPU work (a 20 s
    stereo loop: ~0.3 s here): made after the work span, every client waited for it past the device's end."""
    tiiny.load(FOUNDATION)
    tiiny.set_speed(34)  # a 20 s loop = 68 device-s = 2 s
    last_busy, stop = [0.0], threading.Event()

    def watch() -> None:
        with tiiny.client() as c:
            while not stop.is_set():
                if c.get("/__emulator__/counters").json()["current_work"] > 0:
                    last_busy[0] = time.monotonic()
                time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with tiiny.client() as c:
            req = {"model": FOUNDATION, "prompt": "pads", "config": {"seconds_total": 20, "seed": 3}}
            wav = c.post("/v1/music/generate/wav", json=req, timeout=30)
            answered = time.monotonic()
    finally:
        stop.set()
        watcher.join()
    assert wav.status_code == 200 and _is_wav(wav.content)
    assert last_busy[0] and answered - last_busy[0] < 0.15, answered - last_busy[0]


def test_it_makes_songs_by_preview_then_resume_and_serves_the_session(tiiny):
    tiiny.load(SONGGEN)
    cfg = {"caption": "lofi piano", "generation_type": "bgm", "seconds_total": 3}
    with tiiny.client() as c:
        no_preview = c.post("/v1/music/generate/preview", json={"model": SONGGEN, "config": cfg})
        assert no_preview.status_code == 400 and no_preview.json()["error"] == "preview_seconds must be set"
        prev = c.post(
            "/v1/music/generate/preview", json={"model": SONGGEN, "config": {**cfg, "preview_seconds": 1}}
        ).json()
        assert prev["success"] is True and prev["duration"] == 1 and prev["sample_rate"] == 48000
        sid = prev["session_id"]
        assert (
            c.post("/v1/music/generate/resume", json={"model": SONGGEN, "session_id": sid}).status_code == 400
        )
        full = c.post(
            "/v1/music/generate/resume",
            json={"model": SONGGEN, "session_id": sid, "config": {"seconds_total": 60}},
        ).json()
        assert full["duration"] == 3  # resume ignores seconds_total
        sessions = c.get("/v1/music/sessions").json()["sessions"]
        assert [s["session_id"] for s in sessions] == [sid]
        wav = c.get(f"/v1/music/sessions/{sid}/download?format=wav")
        mp3 = c.get(f"/v1/music/sessions/{sid}/download?format=mp3")
        missing = c.get("/v1/music/sessions/nope/download")
    assert _is_wav(wav.content) and _is_mp3(mp3.content)
    assert missing.status_code == 404 and missing.json()["error_code"] == "SESSION_NOT_FOUND"


def test_it_fails_plain_generate_for_songgeneration_with_session_not_found(tiiny):
    tiiny.load(SONGGEN)
    with tiiny.client() as c:
        plain = c.post("/v1/music/generate", json={"model": SONGGEN, "config": {"caption": "x"}})
        extra = c.post(
            "/v1/music/generate/preview",
            json={"model": SONGGEN, "prompt": "x", "config": {"preview_seconds": 1}},
        )
    assert plain.status_code == 404
    assert plain.json()["error_code"] == "SESSION_NOT_FOUND" and plain.json()["success"] is False
    assert plain.json()["error"].startswith("Session not found: ")
    assert extra.status_code == 400
    assert extra.json()["error"] == "Extra inputs are not permitted in request: prompt"
    assert extra.json()["error_code"] == "INVALID_REQUEST"


def test_it_generates_songs_directly_with_songgen_session_off(tiiny):
    tiiny.disable_quirks("songgen_session")
    tiiny.load(SONGGEN)
    with tiiny.client() as c:
        resp = c.post(
            "/v1/music/generate", json={"model": SONGGEN, "prompt": "x", "config": {"seconds_total": 2}}
        )
    assert resp.status_code == 200 and resp.json()["success"] is True


# ----- 3D --------------------------------------------------------------------------------------------------


def _stage(c, stage: str, files: dict, params: dict | None = None) -> dict:
    resp = c.post("/v1/3d/tasks", data={"stage": stage, "params": json.dumps(params or {})}, files=files)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_it_runs_hunyuan_stages_to_glb_artifacts(tiiny):
    tiiny.load(HUNYUAN)
    image = {"image": ("in.png", PNG_MAGIC + b"0" * 100, "image/png")}
    with tiiny.client() as c:
        caps = c.get("/v1/3d/capabilities").json()
        assert caps["server"] == "Image-to-3D Server" and caps["version"] == "2.0.0"
        assert {"shape", "simplify", "texture", "export"} <= set(caps["stages"])
        assert c.post("/v1/3d/tasks", data={"stage": "shape"}).status_code == 400  # needs an image
        task = _stage(c, "shape", image, {"seed": 5})
        assert task["status"] == "queued" and task["stage"] == "shape"
        done = wait_task(c, task["task_id"])
        assert done["status"] == "succeeded" and done["progress"] == 100
        art = done["artifacts"][0]
        glb = c.get(art["url"]).content
        listed = c.get(f"/v1/3d/tasks/{task['task_id']}/artifacts").json()["artifacts"]
        mesh = {"mesh": ("shape.glb", glb, "model/gltf-binary")}
        textured = wait_task(c, _stage(c, "texture", {**mesh, **image})["task_id"])
        exported = wait_task(c, _stage(c, "export", mesh, {"format": "glb"})["task_id"])
    assert _is_glb(glb) and art["size_bytes"] == len(glb) and listed == done["artifacts"]
    assert textured["status"] == exported["status"] == "succeeded"
    assert tiiny.counters()["tasks_submitted"] == 3


def test_it_fails_the_hunyuan_background_stage(tiiny):
    tiiny.load(HUNYUAN)
    with tiiny.client() as c:
        done = wait_task(c, _stage(c, "background", {"image": ("in.png", PNG_MAGIC, "image/png")})["task_id"])
    assert done["status"] == "failed" and "BriefNet" in done["error"]["message"]


def test_it_removes_backgrounds_with_hunyuan_background_off(tiiny):
    tiiny.disable_quirks("hunyuan_background")
    tiiny.load(HUNYUAN)
    with tiiny.client() as c:
        done = wait_task(c, _stage(c, "background", {"image": ("in.png", PNG_MAGIC, "image/png")})["task_id"])
        png = c.get(done["artifacts"][0]["url"]).content
    assert done["status"] == "succeeded" and png.startswith(PNG_MAGIC)


def test_it_cancels_3d_tasks_and_forgets_them_on_power_cycle(tiiny):
    tiiny.load(HUNYUAN)
    tiiny.set_speed(60)  # shape = 7 s
    image = {"image": ("in.png", PNG_MAGIC, "image/png")}
    with tiiny.client() as c:
        task = _stage(c, "shape", image)
        cancelled = c.post(f"/v1/3d/tasks/{task['task_id']}/cancel").json()
        assert cancelled["status"] == "cancelled"
        assert c.post(f"/v1/3d/tasks/{task['task_id']}/cancel").status_code == 409
        wait_for(lambda: tiiny.counters()["current_work"] == 0, what="cancelled task to release the NPU")
        other = _stage(c, "shape", image)
        tiiny.power_cycle()
        tiiny.unlock()
        assert c.get(f"/v1/3d/tasks/{other['task_id']}").status_code == 404


# ----- chat ------------------------------------------------------------------------------------------------


def _stream_chunks(tiiny) -> list:
    tiiny.load(CHAT)
    body = {"model": CHAT, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with tiiny.client() as c, c.stream("POST", "/v1/chat/completions", json=body) as resp:
        lines = [ln[6:] for ln in resp.iter_lines() if ln.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(x) for x in lines[:-1]]


def test_it_ends_streaming_chat_with_an_empty_choices_usage_chunk(tiiny):
    chunks = _stream_chunks(tiiny)
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0


def test_it_streams_chat_without_a_usage_chunk_with_chat_usage_chunk_off(tiiny):
    tiiny.disable_quirks("chat_usage_chunk")
    assert all(chunk["choices"] for chunk in _stream_chunks(tiiny))


def test_it_answers_plain_chat(tiiny):
    tiiny.load(CHAT)
    with tiiny.client() as c:
        body = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}).json()
    assert body["object"] == "chat.completion" and body["choices"][0]["message"]["content"]
    assert httpx.post(tiiny.base_url + "/v1/chat/completions", json={}).status_code == 401
