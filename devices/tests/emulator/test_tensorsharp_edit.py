"""TensorSharp.Server.Host emulator over real HTTP: Qwen-Image-Edit routes."""

from __future__ import annotations

import base64
import io
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from PIL import Image

from devices.emulator import media
from devices.emulator.testing import RunningEmulator, run_tensorsharp

pytestmark = pytest.mark.integration

EDIT_URL = re.compile(r"^/uploads/edit-[0-9a-f]{32}\.png$")
NOT_EDIT = "The loaded model is not a Qwen-Image-Edit model."


@pytest.fixture(scope="module")
def editor() -> Iterator[RunningEmulator]:
    with run_tensorsharp(model="qwen-image-edit", speed=600) as emulator:
        yield emulator


@pytest.fixture
def client(editor: RunningEmulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=editor.base_url, timeout=30) as c:
        yield c


def _photo() -> bytes:
    return media.png_bytes(prompt="a street", width=640, height=320)


def _frames(resp: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(chunk[len("data: ") :]) for chunk in resp.text.split("\n\n") if chunk]


def test_multipart_edit(client: httpx.Client) -> None:
    fields = {"prompt": "Replace the background with a sunny beach", "steps": "4", "cfg": "0", "seed": "42"}
    resp = client.post("/api/image-edit", files={"image": ("photo.png", _photo(), "image/png")}, data=fields)
    assert resp.status_code == 200
    body = resp.json()
    assert set(body) == {"ok", "url", "width", "height", "elapsedSeconds"} and body["ok"] is True
    assert EDIT_URL.match(body["url"])
    image = Image.open(io.BytesIO(client.get(body["url"]).content))
    assert image.size == (body["width"], body["height"])
    assert body["width"] > body["height"]  # follows the 2:1 input


def test_json_edit_with_uploaded_image(client: httpx.Client) -> None:
    name = client.post("/api/upload", files={"file": ("p.png", _photo(), "image/png")}).json()["file"]
    resp = client.post("/api/image-edit", json={"imagePath": name, "prompt": "make it night", "steps": 2})
    assert resp.status_code == 200 and resp.json()["ok"] is True
    resp = client.post("/api/image-edit", json={"imagePaths": ["missing.png"], "prompt": "x"})
    assert resp.status_code == 400 and "imagePath" in resp.json()["error"]
    resp = client.post("/api/image-edit", json={"imagePath": name, "prompt": ""})
    assert resp.status_code == 400 and resp.json() == {"error": "prompt is required."}


def test_stream_has_throttled_previews_then_final(client: httpx.Client) -> None:
    name = client.post("/api/upload", files={"file": ("p.png", _photo(), "image/png")}).json()["file"]
    resp = client.post("/api/image-edit/stream", json={"imagePath": name, "prompt": "beach", "steps": 20})
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
    frames = _frames(resp)
    ticks, final = frames[:-1], frames[-1]
    assert [t["step"] for t in ticks] == list(range(1, 21))
    assert all(set(t) == {"imageEdit", "step", "total", "image", "width", "height"} for t in ticks)
    previews = [t["image"] for t in ticks if t["image"] is not None]
    assert 1 <= len(previews) <= 8 and ticks[-1]["image"] is not None
    png = base64.b64decode(previews[0].split(",", 1)[1])
    assert previews[0].startswith("data:image/png;base64,") and png[:8] == b"\x89PNG\r\n\x1a\n"
    assert final["done"] is True and EDIT_URL.match(final["url"])
    assert set(final) == {"done", "url", "width", "height", "elapsedSeconds"}


def test_stream_error_frame(client: httpx.Client) -> None:
    resp = client.post("/api/image-edit/stream", json={"imagePath": "missing.png", "prompt": "x"})
    assert resp.status_code == 200
    frames = _frames(resp)
    assert len(frames) == 1 and frames[0]["done"] is True and "imagePath" in frames[0]["error"]


def test_video_model_refuses_edits() -> None:
    with run_tensorsharp(model="minimax-h3") as emulator, httpx.Client(base_url=emulator.base_url) as client:
        files = {"image": ("p.png", _photo(), "image/png")}
        resp = client.post("/api/image-edit", files=files, data={"prompt": "x"})
        assert resp.status_code == 400 and resp.json() == {"error": NOT_EDIT}
        resp = client.post("/api/image-edit/stream", json={"imagePath": "x.png", "prompt": "x"})
        assert resp.status_code == 400 and resp.json() == {"error": NOT_EDIT}
