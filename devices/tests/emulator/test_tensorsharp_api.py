"""TensorSharp.Server.Host emulator over real HTTP: info routes, uploads, serving files, control API."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator

import httpx
import pytest
from PIL import Image

from devices.emulator import media
from devices.emulator.testing import RunningEmulator, run_tensorsharp

pytestmark = pytest.mark.integration

HEX_FILE = re.compile(r"^[0-9a-f]{32}\.[a-z0-9]+$")


@pytest.fixture(scope="module")
def h3() -> Iterator[RunningEmulator]:
    with run_tensorsharp(model="minimax-h3", speed=600) as emulator:
        yield emulator


@pytest.fixture
def client(h3: RunningEmulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=h3.base_url, timeout=30) as c:
        yield c


def _png() -> bytes:
    return media.png_bytes(prompt="upload me", width=96, height=64)


def test_health_is_plain_text(client: httpx.Client) -> None:
    resp = client.get("/health")
    assert resp.status_code == 200
    assert resp.text == "TensorSharp.Server.Host is running"


def test_models_h3_reports_the_video_block(client: httpx.Client) -> None:
    body = client.get("/api/models").json()
    assert body["architecture"] == "minimax-h3"
    assert body["models"] == [body["loaded"]] and "/" not in body["loaded"]  # file names only
    assert body["loadedMmProj"] is None and body["skills"] is None  # null members are emitted
    assert body["mmProjModels"] == []
    assert body["video"] == {
        "family": "minimax-h3",
        "supportsAudio": True,
        "supportsImageConditioning": True,
        "supportsEndImageConditioning": True,
        "supportsReferenceConditioning": False,
        "maxReferenceImages": 0,
    }
    for key in ("visionReady", "acceptsVisionProjector"):
        assert body[key] is False
    for key in ("contextTokens", "modelContextTokens", "defaultMaxTokens"):
        assert isinstance(body[key], int)
    assert isinstance(body["supportedBackends"], list) and body["loadedBackend"] in body["supportedBackends"]


@pytest.mark.parametrize(
    ("model", "architecture", "family"),
    [("wan", "wan", "wan"), ("qwen-image-edit", "qwen_image", None)],
)
def test_models_other_architectures(model: str, architecture: str, family: str | None) -> None:
    with run_tensorsharp(model=model) as emulator:
        body = httpx.get(emulator.base_url + "/api/models").json()
    assert body["architecture"] == architecture
    if family is None:
        assert body["video"] is None
    else:
        assert body["video"]["family"] == family
        assert body["video"]["supportsAudio"] is False
        assert body["video"]["supportsEndImageConditioning"] is False


def test_queue_status_shape(client: httpx.Client) -> None:
    assert client.get("/api/queue/status").json() == {
        "busy": False,
        "processing": 0,
        "pending_requests": 0,
        "total_processed": 0,
    }


def test_upload_image_then_serve_it(client: httpx.Client) -> None:
    data = _png()
    resp = client.post("/api/upload", files={"file": ("photo.png", data, "image/png")})
    assert resp.status_code == 200
    body = resp.json()
    assert body["ok"] is True and body["mediaType"] == "image" and body["fileName"] == "photo.png"
    assert HEX_FILE.match(body["file"]) and body["file"].endswith(".png")
    assert body["url"] == f"/uploads/{body['file']}"
    served = client.get(body["url"])
    assert served.status_code == 200 and served.content == data


def test_upload_uses_the_first_file(client: httpx.Client) -> None:
    files = [("a", ("first.txt", b"hello", "text/plain")), ("b", ("second.png", _png(), "image/png"))]
    body = client.post("/api/upload", files=files).json()
    assert body["fileName"] == "first.txt" and body["mediaType"] == "text"
    assert body["textContent"] == "hello"
    assert body["truncated"] is False and body["truncateLimit"] is None and body["originalTokenCount"] is None


def test_upload_csv_is_file_backed(client: httpx.Client) -> None:
    body = client.post("/api/upload", files={"file": ("t.csv", b"a,b\n1,2\n", "text/csv")}).json()
    assert body["fileBacked"] is True and "textContent" not in body


def test_upload_video_returns_frames(client: httpx.Client) -> None:
    clip = media.video_mp4(prompt="upload", seconds=2, width=320, height=192, audio=False).read_bytes()
    body = client.post("/api/upload", files={"file": ("clip.mp4", clip, "video/mp4")}).json()
    assert body["mediaType"] == "video"
    assert len(body["frames"]) >= 2 and len(body["frames"]) == len(body["frameUrls"])
    frame = client.get(body["frameUrls"][0])
    assert frame.status_code == 200 and Image.open(io.BytesIO(frame.content)).size == (320, 192)


def test_upload_unreadable_video(client: httpx.Client) -> None:
    resp = client.post("/api/upload", files={"file": ("broken.mp4", b"not a video", "video/mp4")})
    assert resp.status_code == 400
    body = resp.json()
    assert body["ok"] is False and body["error"].startswith("Could not read the video: ")


def test_upload_heic_has_preview(client: httpx.Client) -> None:
    body = client.post(
        "/api/upload", files={"file": ("IMG_1.HEIC", b"\0\0\0\x18ftypheic", "image/heic")}
    ).json()
    assert body["mediaType"] == "image" and client.get(body["previewUrl"]).status_code == 200


def test_upload_unsupported_type(client: httpx.Client) -> None:
    resp = client.post("/api/upload", files={"file": ("x.xyz", b"?", "application/octet-stream")})
    assert resp.status_code == 400
    assert resp.json() == {
        "error": "Unsupported file type '.xyz'. Upload an image, video, audio, PDF, or plain-text/code file."
    }


def test_upload_requires_multipart(client: httpx.Client) -> None:
    resp = client.post("/api/upload", json={"file": "x"})
    assert resp.status_code == 400 and resp.json() == {"error": "Expected multipart form data"}


def test_uploads_cannot_escape_the_directory(client: httpx.Client) -> None:
    assert client.get("/uploads/..%2F..%2Fetc%2Fpasswd").status_code == 404
    assert client.get("/uploads/0123456789abcdef0123456789abcdef.png").status_code == 404


def test_unknown_route_is_an_empty_404(client: httpx.Client) -> None:
    resp = client.get("/api/nope")
    assert resp.status_code == 404 and resp.content == b""


def test_control_api(h3: RunningEmulator, client: httpx.Client) -> None:
    h3.reset_counters()
    client.get("/health")
    client.get("/health")
    counters = h3.counters()
    assert counters["requests"] == {"GET /health": 2}
    for key in ("renders_submitted", "renders_completed", "renders_cancelled", "current_work"):
        assert counters[key] == 0
    assert h3.set_speed(123.0) == {"ok": True, "speed": 123.0}
    assert httpx.post(h3.base_url + "/__emulator__/speed", json={"speed": -1}).status_code == 400
    # reset restores the start-up speed and forgets uploads.
    uploaded = client.post("/api/upload", files={"file": ("a.txt", b"x", "text/plain")}).json()
    assert h3.reset() == {"ok": True}
    assert client.get(uploaded["url"]).status_code == 404
    assert h3.counters()["requests"] == {"GET /uploads/{name}": 1}  # counters started again from zero
