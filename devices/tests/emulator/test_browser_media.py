"""What the emulated Tiiny produces opens in a real browser: video plays, GLB renders, audio and image load.

The media come from the emulator over HTTP through the hub's own client, then Chromium fetches them from
routed URLs (no server of ours in between), exactly as the bytes would reach a person's browser.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from devices.clients.tiiny import TiinyClient

pytestmark = [pytest.mark.browser]

STATIC = Path(__file__).resolve().parents[3] / "static"
VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"
MESH = "tencent/Hunyuan3D-2.1"
LOOPS = "RoyalCities/Foundation-1"
IMAGE = "Tongyi-MAI/Z-Image-Turbo"
VOICE = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"


def _until(fn, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(what)


@pytest.fixture
def media(tiiny, tmp_path) -> dict[str, tuple[bytes, str]]:
    tiiny.set_quirks("none")
    client = TiinyClient(tiiny.base_url, tiiny.api_key, poll_interval=0.01, load_grace_s=0.02)
    out: dict[str, tuple[bytes, str]] = {}

    client.ensure_loaded(VIDEO, deadline_s=30)
    video_id = client.video_create(
        model=VIDEO, prompt="a fox in the snow", size="832x480", seconds=2, steps=4
    )["id"]
    _until(lambda: client.video_get(video_id)["status"] == "completed", "the video render")
    client.video_download(video_id, tmp_path / "v.mp4")
    out["video.mp4"] = ((tmp_path / "v.mp4").read_bytes(), "video/mp4")

    client.ensure_loaded(IMAGE, deadline_s=30)
    png = client.image_generate(model=IMAGE, prompt="a lighthouse", size="512x512", timeout=60)
    out["image.png"] = (png, "image/png")

    client.ensure_loaded(MESH, deadline_s=30)
    task = client.task3d_create(stage="shape", params={}, files={"image": ("in.png", png, "image/png")})
    task_id = task.get("task_id") or task["id"]
    done = _until(
        lambda: (t := client.task3d_get(task_id))["status"] == "succeeded" and t, "the 3D shape stage"
    )
    artifact = done["artifacts"][0]
    client.task3d_download(str(artifact.get("url") or artifact["name"]), tmp_path / "m.glb")
    out["model.glb"] = ((tmp_path / "m.glb").read_bytes(), "model/gltf-binary")

    client.ensure_loaded(LOOPS, deadline_s=30)
    wav = client.music_wav(
        model=LOOPS, prompt="warm synth loop", seconds=4, steps=8, cfg_scale=7, seed=1, timeout=60
    )
    out["music.wav"] = (wav, "audio/wav")

    client.ensure_loaded(VOICE, deadline_s=30)
    out["speech.wav"] = (
        client.speech(model=VOICE, input="Hello from the hub.", voice="vivian", timeout=60),
        "audio/wav",
    )
    return out


# model-viewer loads lazily when scrolled into view: "eager" makes it load below the fold too.
PAGE = """<!doctype html><script type="module" src="/model-viewer.min.js"></script>
<video id="v" src="/video.mp4" preload="auto" muted></video>
<audio id="m" src="/music.wav" preload="auto"></audio>
<audio id="s" src="/speech.wav" preload="auto"></audio>
<img id="i" src="/image.png" alt="">
<model-viewer id="g" src="/model.glb" loading="eager" style="width:300px;height:300px"></model-viewer>"""


def test_everything_the_emulator_makes_opens_in_chromium(browser, media):
    context = browser.new_context()
    page = context.new_page()
    files = {
        **media,
        "model-viewer.min.js": (
            (STATIC / "vendor/model-viewer/model-viewer.min.js").read_bytes(),
            "text/javascript",
        ),
        "index.html": (PAGE.encode(), "text/html"),
    }

    def serve(route):
        body, mime = files[route.request.url.rsplit("/", 1)[1]]
        route.fulfill(status=200, body=body, content_type=mime, headers={"Accept-Ranges": "none"})

    page.route("http://media.test/**", serve)
    page.goto("http://media.test/index.html")
    page.wait_for_function("document.getElementById('v').readyState >= 2", timeout=20000)
    page.wait_for_function("document.getElementById('m').readyState >= 2", timeout=20000)
    page.wait_for_function("document.getElementById('s').readyState >= 2", timeout=20000)
    page.wait_for_function(
        "document.getElementById('i').complete && document.getElementById('i').naturalWidth > 0"
    )
    page.wait_for_function("customElements.get('model-viewer') && document.getElementById('g').loaded === true",
                           timeout=30000)  # fmt: skip
    assert page.evaluate("document.getElementById('v').videoWidth") == 832
    assert page.evaluate("document.getElementById('m').duration") == pytest.approx(4, abs=0.2)
    context.close()
