"""The emulator's media helpers produce genuine, well-formed files (not placeholders)."""

from __future__ import annotations

import io
import json
import multiprocessing
import pathlib
import struct
import time
import wave

import imageio_ffmpeg
import pytest
from PIL import Image

from devices.emulator import media


@pytest.fixture(autouse=True)
def media_cache(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    cache = tmp_path / "media-cache"
    monkeypatch.setenv("EMULATOR_MEDIA_CACHE", str(cache))
    return cache


def _mp4_boxes(data: bytes) -> set[bytes]:
    """The four-character codes we care about, found anywhere in the file (moov sits up front: faststart)."""
    return {code for code in (b"ftyp", b"moov", b"avc1", b"mp4a", b"mdat") if code in data}


def test_video_mp4_is_h264_aac_with_the_right_duration() -> None:
    path = media.video_mp4(prompt="a red fox in snow", seconds=2, width=832, height=480)
    data = path.read_bytes()
    assert data[4:8] == b"ftyp"
    assert {b"moov", b"avc1", b"mp4a"} <= _mp4_boxes(data)
    # +faststart puts the index before the media data, so browsers can start playing while downloading.
    assert data.index(b"moov") < data.index(b"mdat")
    frames, secs = imageio_ffmpeg.count_frames_and_secs(str(path))
    assert frames == 48
    assert abs(secs - 2.0) <= 0.2


def test_video_mp4_without_audio_has_no_audio_track() -> None:
    path = media.video_mp4(prompt="silent", seconds=22 / 24, width=640, height=384, audio=False)
    data = path.read_bytes()
    assert b"avc1" in data and b"mp4a" not in data
    _, secs = imageio_ffmpeg.count_frames_and_secs(str(path))
    assert abs(secs - 22 / 24) <= 0.2


def test_video_mp4_reports_full_resolution() -> None:
    path = media.video_mp4(prompt="size", seconds=0.5, width=1344, height=768, fps=24)
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    reader.close()
    assert tuple(meta["size"]) == (1344, 768)
    assert meta["fps"] == 24


def test_video_mp4_cache_hit_returns_same_path_fast(media_cache: pathlib.Path) -> None:
    first = media.video_mp4(prompt="cached", seconds=1, width=320, height=192)
    mtime = first.stat().st_mtime_ns
    started = time.perf_counter()
    second = media.video_mp4(prompt="cached", seconds=1, width=320, height=192)
    assert time.perf_counter() - started < 0.05
    assert second == first and second.stat().st_mtime_ns == mtime
    assert first.parent == media_cache
    # Different parameters are a different file.
    assert media.video_mp4(prompt="cached", seconds=1, width=320, height=192, seed=1) != first


def _render_in_child(args: tuple[str, str]) -> str:
    import os

    os.environ["EMULATOR_MEDIA_CACHE"] = args[0]
    return str(media.video_mp4(prompt=args[1], seconds=1, width=320, height=192))


def test_video_mp4_concurrent_processes_agree(media_cache: pathlib.Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        paths = pool.map(_render_in_child, [(str(media_cache), "race")] * 2)
    assert paths[0] == paths[1]
    assert imageio_ffmpeg.count_frames_and_secs(paths[0])[0] == 24
    # No temp files left behind by either writer.
    assert not [p for p in media_cache.iterdir() if ".tmp" in p.name]


def test_video_mp4_rejects_odd_sizes() -> None:
    with pytest.raises(ValueError, match="even"):
        media.video_mp4(prompt="odd", seconds=1, width=321, height=192)


def test_video_mp4_pillow_fallback_when_drawtext_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(media, "_has_filter", lambda name: False)
    path = media.video_mp4(prompt="fallback", seconds=1, width=320, height=192)
    frames, secs = imageio_ffmpeg.count_frames_and_secs(str(path))
    assert frames == 24 and abs(secs - 1.0) <= 0.2


@pytest.mark.parametrize(("rate", "channels", "seconds"), [(32000, 2, 1.5), (48000, 1, 0.75)])
def test_video_audio_wav_sidecar(rate: int, channels: int, seconds: float) -> None:
    path = media.video_audio_wav(seconds=seconds, sample_rate=rate, channels=channels)
    with wave.open(str(path)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (rate, channels, 2)
        assert abs(wav.getnframes() / rate - seconds) < 0.01
    assert media.video_audio_wav(seconds=seconds, sample_rate=rate, channels=channels) == path


@pytest.mark.parametrize("kind", ["music", "speech"])
def test_wav_bytes_is_audible(kind: str) -> None:
    data = media.wav_bytes(seconds=1.0, sample_rate=16000, channels=1, kind=kind)
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    with wave.open(io.BytesIO(data)) as wav:
        assert (wav.getframerate(), wav.getnchannels()) == (16000, 1)
        assert wav.getnframes() == 16000
        samples = struct.unpack(f"<{wav.getnframes()}h", wav.readframes(wav.getnframes()))
    peak = max(abs(s) for s in samples)
    assert peak > 2000, "should be clearly audible, not silence"


def test_wav_bytes_rejects_unknown_kind() -> None:
    with pytest.raises(ValueError):
        media.wav_bytes(seconds=1, kind="noise")


def test_mp3_bytes_has_frame_sync() -> None:
    data = media.mp3_bytes(seconds=1.0)
    # Skip an ID3v2 tag if present, then expect an MPEG audio frame header (11 set sync bits).
    offset = 0
    if data[:3] == b"ID3":
        size = data[6] << 21 | data[7] << 14 | data[8] << 7 | data[9]
        offset = 10 + size
    assert data[offset] == 0xFF and data[offset + 1] & 0xE0 == 0xE0
    assert len(data) > 5000


def test_png_bytes() -> None:
    data = media.png_bytes(prompt="a lighthouse at dusk", width=640, height=360, seed=3)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    image = Image.open(io.BytesIO(data))
    image.load()
    assert image.size == (640, 360)
    # Not a flat colour: gradient plus text.
    assert len(image.getcolors(maxcolors=1 << 20) or []) > 50


@pytest.mark.parametrize("textured", [False, True])
def test_glb_bytes(textured: bool) -> None:
    data = media.glb_bytes(textured=textured, seed=5)
    magic, version, length = struct.unpack_from("<4sII", data)
    assert (magic, version, length) == (b"glTF", 2, len(data))
    json_len, json_type = struct.unpack_from("<I4s", data, 12)
    assert json_type == b"JSON" and json_len % 4 == 0
    doc = json.loads(data[20 : 20 + json_len])
    bin_len, bin_type = struct.unpack_from("<I4s", data, 20 + json_len)
    assert bin_type == b"BIN\0" and bin_len % 4 == 0
    assert 20 + json_len + 8 + bin_len == len(data)
    assert doc["asset"]["version"] == "2.0"
    assert len(doc["meshes"]) == 1
    assert doc["buffers"][0]["byteLength"] == bin_len
    primitive = doc["meshes"][0]["primitives"][0]
    position = doc["accessors"][primitive["attributes"]["POSITION"]]
    assert len(position["min"]) == 3 and len(position["max"]) == 3
    assert "NORMAL" in primitive["attributes"]
    for view in doc["bufferViews"]:
        assert view["byteOffset"] % 4 == 0 and view["byteOffset"] + view["byteLength"] <= bin_len
    if textured:
        assert "TEXCOORD_0" in primitive["attributes"]
        image_view = doc["bufferViews"][doc["images"][0]["bufferView"]]
        start = 20 + json_len + 8 + image_view["byteOffset"]
        assert data[start : start + 8] == b"\x89PNG\r\n\x1a\n"
        assert doc["materials"][0]["pbrMetallicRoughness"]["baseColorTexture"] == {"index": 0}
    else:
        assert "images" not in doc
