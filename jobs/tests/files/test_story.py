"""Files that tell how they were made (``jobs.files.story``): a stored result carries its settings in its format's
own metadata, read back here by readers that share nothing with the writers (Pillow, the ``wave`` module and a
RIFF walk, the bundled ffmpeg, a GLB's JSON chunk), and the media stays valid."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import wave
from io import BytesIO
from pathlib import Path

import imageio_ffmpeg
import pytest
from PIL import Image

from devices.emulator import media as emu
from jobs.files import store, story
from jobs.models import JobLink
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db
PROMPT = "a lighthouse at dusk, “warm” light"


@pytest.fixture
def hub_url(settings):
    settings.HUB_PUBLIC_URL = "https://hub.example.lan"
    return settings.HUB_PUBLIC_URL


def stored_bytes(art) -> bytes:
    return store.read_bytes(art.file.name)


def assert_checksum_is_of_stored(art) -> None:
    digest, size = store.digest_of(art.file.name)
    assert (art.sha256, art.bytes) == (digest, size)


def test_a_png_tells_its_settings_in_text_chunks_pillow_reads(member, device, media, hub_url):
    job = make_job(member, device, kind="image", state="running", prompt=PROMPT)
    job.params = {**job.params, "seed": 41, "negative_prompt": "fog"}
    job.save()
    png = emu.png_bytes(prompt=PROMPT, width=64, height=48, seed=1)
    art = store.save_artifact(job, kind="image", name="image-2.png", data=png, mime="image/png")
    data = stored_bytes(art)
    assert data != png
    assert_checksum_is_of_stored(art)
    with Image.open(BytesIO(data)) as img:
        img.load()
        assert img.size == (64, 48)
        told = json.loads(img.text["tiiny-hub"])
        parameters = img.text["parameters"]
    assert told["prompt"] == PROMPT and told["model"] == job.model_id
    assert told["seed"] == 42  # the second image of the job: the job's seed + 1
    assert told["steps"] == 8 and told["size"] == "512x512" and told["device"] == device.name
    assert told["url"] == f"{hub_url}/jobs/{job.pk}/" and told["parents"] == []
    assert parameters.startswith(PROMPT + "\nNegative prompt: fog\n")
    assert "Seed: 42" in parameters and f"Job: {hub_url}/jobs/{job.pk}/" in parameters
    # The pixels are the device's, untouched.
    with Image.open(BytesIO(png)) as before, Image.open(BytesIO(data)) as after:
        assert before.tobytes() == after.tobytes()


def test_nothing_private_is_told(member, device, media, hub_url):
    job = make_job(member, device, kind="image", state="running", prompt=PROMPT)
    member.email = "mia@example.lan"
    member.save()
    job.share_token = "s3cret-share-token"
    job.save()
    art = store.save_artifact(
        job, kind="image", name="image-1.png", data=emu.png_bytes(prompt="x", width=16, height=16)
    )
    data = stored_bytes(art)
    assert member.email.encode() not in data
    assert b"s3cret-share-token" not in data
    assert b"mia" not in data


def test_told_twice_keeps_one_story(member, device, media, hub_url):
    job = make_job(member, device, kind="image", state="running")
    first = stored_bytes(
        store.save_artifact(
            job, kind="image", name="image-1.png", data=emu.png_bytes(prompt="x", width=16, height=16)
        )
    )
    again = stored_bytes(store.save_artifact(job, kind="image", name="image-1.png", data=first))
    assert again.count(b"tiiny-hub") == 1
    assert story.read_story(again)["job"] == job.pk


def test_a_png_from_a_download_path_is_told_in_place(member, device, media, hub_url, tmp_path):
    job = make_job(member, device, kind="image", state="running")
    download = store.work_path(job, "image.png.download")
    download.write_bytes(emu.png_bytes(prompt="x", width=16, height=16))
    art = store.save_artifact(job, kind="image", name="image.png", path=download, mime="image/png")
    assert story.read_story(stored_bytes(art))["url"].endswith(f"/jobs/{job.pk}/")
    assert_checksum_is_of_stored(art)
    assert not list(Path(download.parent).glob(".*.part"))


def riff_chunks(data: bytes) -> dict[bytes, bytes]:
    found, pos = {}, 12
    while pos + 8 <= len(data):
        cid, size = data[pos : pos + 4], struct.unpack("<I", data[pos + 4 : pos + 8])[0]
        body = data[pos + 8 : pos + 8 + size]
        found[cid + (body[:4] if cid == b"LIST" else b"")] = body
        pos += 8 + size + (size & 1)
    return found


def test_a_wav_tells_its_settings_in_a_list_info_chunk(member, device, media, hub_url):
    job = make_job(member, device, kind="music", state="running", prompt=PROMPT)
    wav = emu.wav_bytes(seconds=0.5)
    art = store.save_artifact(job, kind="audio", name="loop.wav", data=wav, mime="audio/wav")
    data = stored_bytes(art)
    assert_checksum_is_of_stored(art)
    with wave.open(BytesIO(data)) as told, wave.open(BytesIO(wav)) as before:
        assert told.readframes(told.getnframes()) == before.readframes(before.getnframes())
    assert struct.unpack("<I", data[4:8])[0] == len(data) - 8
    info = riff_chunks(data)[b"LISTINFO"][4:]
    fields, pos = {}, 0
    while pos + 8 <= len(info):
        cid, size = info[pos : pos + 4], struct.unpack("<I", info[pos + 4 : pos + 8])[0]
        fields[cid] = info[pos + 8 : pos + 8 + size].rstrip(b"\x00").decode()
        pos += 8 + size + (size & 1)
    assert fields[b"INAM"] == PROMPT
    told = json.loads(fields[b"ICMT"])
    assert told["seconds"] == 4 and told["steps"] == 50 and told["kind"] == "music"


def ffmpeg_metadata(path: Path) -> dict[str, str]:
    out = subprocess.run(
        [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(path), "-f", "ffmetadata", "-"],
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    found, key = {}, None
    for line in out.splitlines():
        if "=" in line and not line.startswith(";"):
            key, _, value = line.partition("=")
            found[key] = value
        elif key:
            found[key] += "\n" + line
    return {
        k: v.replace("\\\n", "\n")
        .replace("\\=", "=")
        .replace("\\;", ";")
        .replace("\\#", "#")
        .replace("\\\\", "\\")
        for k, v in found.items()
    }


def decodes_cleanly(path: Path) -> str:
    run = subprocess.run(
        [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(path), "-f", "null", "-"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0
    return run.stderr


def top_boxes(data: bytes) -> list[bytes]:
    found, pos = [], 0
    while pos + 8 <= len(data):
        size, btype = struct.unpack(">I4s", data[pos : pos + 8])
        found.append(btype)
        pos += size
    assert pos == len(data)
    return found


@pytest.mark.parametrize("faststart", [True, False], ids=["moov-first", "moov-last"])
def test_an_mp4_tells_its_settings_without_re_encoding(member, device, media, hub_url, tmp_path, faststart):
    job = make_job(member, device, kind="video", state="running", prompt=PROMPT)
    source = tmp_path / "source.mp4"
    shutil.copy(emu.video_mp4(prompt=PROMPT, seconds=1, width=64, height=48, fps=8), source)
    if not faststart:  # the same streams, the moov after the media data
        moved = tmp_path / "moov-last.mp4"
        subprocess.run(
            [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(source), "-c", "copy", str(moved)],
            check=True,
        )
        source = moved
    original = source.read_bytes()
    download = store.work_path(job, "video.mp4.download")
    shutil.copy(source, download)
    art = store.save_artifact(job, kind="video", name="video.mp4", path=download, mime="video/mp4")
    assert_checksum_is_of_stored(art)
    with store.local_path(art.file.name) as path:
        data = path.read_bytes()
        assert top_boxes(data) == top_boxes(original)
        meta = ffmpeg_metadata(path)
        assert decodes_cleanly(path) == ""
        told = json.loads(meta["comment"])
        assert told["prompt"] == PROMPT and told["url"] == f"{hub_url}/jobs/{job.pk}/"
        assert meta.get("description", str(sorted(meta))).startswith(PROMPT), sorted(meta)
        # Not re-encoded: the media data is byte for byte the device's.
        assert original[original.index(b"mdat") :][:4000] in data
        decoded_before = subprocess.run(
            [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(source), "-f", "framemd5", "-"],
            capture_output=True,
            check=True,
        ).stdout
        decoded_after = subprocess.run(
            [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(path), "-f", "framemd5", "-"],
            capture_output=True,
            check=True,
        ).stdout
        assert decoded_before == decoded_after


def test_a_glb_tells_its_settings_in_asset_extras(member, device, media, hub_url):
    job = make_job(member, device, kind="mesh", state="running")
    glb = emu.glb_bytes(textured=True, seed=3)
    art = store.save_artifact(job, kind="mesh", name="model.glb", data=glb, mime="model/gltf-binary")
    data = stored_bytes(art)
    assert_checksum_is_of_stored(art)
    magic, version, length = struct.unpack("<4sII", data[:12])
    assert (magic, version, length) == (b"glTF", 2, len(data))
    json_len, json_type = struct.unpack("<I4s", data[12:20])
    assert json_type == b"JSON" and json_len % 4 == 0
    doc = json.loads(data[20 : 20 + json_len])
    assert doc["asset"]["version"] == "2.0"
    assert doc["asset"]["extras"]["tiiny-hub"]["job"] == job.pk
    old_json_len = struct.unpack("<I", glb[12:16])[0]
    assert data[20 + json_len :] == glb[20 + old_json_len :]  # the BIN chunk, byte for byte
    bin_len, bin_type = struct.unpack("<I4s", data[20 + json_len : 28 + json_len])
    assert bin_type == b"BIN\x00" and 28 + json_len + bin_len == len(data)


def test_an_mp3_tells_its_settings_in_id3(member, device, media, hub_url, tmp_path):
    job = make_job(member, device, kind="speech", state="running", prompt="Good night, lighthouse.")
    job.params = {**job.params, "response_format": "mp3"}
    job.save()
    mp3 = emu.mp3_bytes(seconds=0.5)
    art = store.save_artifact(job, kind="audio", name="speech.mp3", data=mp3, mime="audio/mpeg")
    path = tmp_path / "speech.mp3"
    path.write_bytes(stored_bytes(art))
    meta = ffmpeg_metadata(path)
    assert meta["title"] == "Good night, lighthouse."
    assert (
        json.loads(meta["tiiny-hub"] if "tiiny-hub" in meta else meta["comment"])["input"]
        == "Good night, lighthouse."
    )
    assert decodes_cleanly(path) == ""


def test_an_mp3_without_a_tag_gets_one_and_told_twice_keeps_one_story(
    member, device, media, hub_url, tmp_path
):
    job = make_job(member, device, kind="speech", state="running", prompt="Good night, lighthouse.")
    tagged = emu.mp3_bytes(seconds=0.5)
    bare = tagged[10 + ((tagged[6] << 21) | (tagged[7] << 14) | (tagged[8] << 7) | tagged[9]) :]  # no ID3 tag
    assert bare[:1] == b"\xff"
    once = stored_bytes(
        store.save_artifact(job, kind="audio", name="speech.mp3", data=bare, mime="audio/mpeg")
    )
    twice = stored_bytes(
        store.save_artifact(job, kind="audio", name="speech.mp3", data=once, mime="audio/mpeg")
    )
    assert (
        once[:3] == b"ID3" and twice.count(b"COMM") == 1 and twice.endswith(bare)
    )  # the audio, byte for byte
    path = tmp_path / "twice.mp3"
    path.write_bytes(twice)
    assert json.loads(ffmpeg_metadata(path)["tiiny-hub"])["job"] == job.pk
    assert decodes_cleanly(path) == ""


def test_a_fragmented_mp4_is_stored_as_it_came(member, device, media, hub_url, tmp_path, caplog):
    job = make_job(member, device, kind="video", state="running", prompt=PROMPT)
    source = emu.video_mp4(prompt="x", seconds=1, width=64, height=48, fps=8, audio=False)
    download = store.work_path(job, "video.mp4.download")
    subprocess.run(
        [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(source), "-c", "copy"]
        + ["-movflags", "frag_keyframe+empty_moov", "-f", "mp4", str(download)],
        check=True,
    )
    fragmented = download.read_bytes()
    assert b"moof" in top_boxes(fragmented)
    art = store.save_artifact(job, kind="video", name="video.mp4", path=download, mime="video/mp4")
    assert stored_bytes(art) == fragmented
    assert_checksum_is_of_stored(art)
    assert "a fragmented MP4" in caplog.text and "stored as it came" in caplog.text


def test_a_failing_writer_keeps_the_result_as_it_came(member, device, media, hub_url, monkeypatch, caplog):
    job = make_job(member, device, kind="image", state="running")
    png = emu.png_bytes(prompt="x", width=16, height=16)

    def broken(*args, **kwargs):
        raise RuntimeError("the writer broke")

    monkeypatch.setattr(story.formats, "write", broken)
    art = store.save_artifact(job, kind="image", name="image-1.png", data=png, mime="image/png")
    assert stored_bytes(art) == png
    assert_checksum_is_of_stored(art)
    assert "stored as it came" in caplog.text


def test_a_broken_file_is_stored_as_it_came(member, device, media, hub_url, tmp_path):
    job = make_job(member, device, kind="video", state="running")
    download = store.work_path(job, "video.mp4.download")
    broken = b"\x00\x00\x00\x20ftypisom" + b"\x00" * 20 + b"\x00\x00\xff\xffmoov"  # a moov past the end
    download.write_bytes(broken)
    art = store.save_artifact(job, kind="video", name="video.mp4", path=download, mime="video/mp4")
    assert stored_bytes(art) == broken
    assert art.bytes == len(broken)


def test_the_thumbnail_tells_nothing(member, device, media, hub_url):
    job = make_job(member, device, kind="image", state="running")
    png = emu.png_bytes(prompt="x", width=16, height=16)
    art = store.save_artifact(job, kind="thumb", name="thumb.png", data=png, mime="image/png")
    assert stored_bytes(art) == png


def test_parents_are_told(member, device, media, hub_url):
    """A stored file names the jobs it was made from: its chain links (JobLink), not anything in its params."""
    parent = make_job(member, device, kind="image", state="done")
    child = make_job(member, device, kind="video", state="running")
    JobLink.objects.create(
        child=child, parent=parent, parent_number=parent.pk, field="start_image", used="image-1.png"
    )
    child.params = {**child.params, "parents": [{"job": 999999}]}  # params say nothing: the links do
    told = story.result_story(child, "video.mp4")
    assert told["parents"] == [
        {
            "job": parent.pk,
            "url": f"{hub_url}/jobs/{parent.pk}/",
            "field": "start_image",
            "artifact": "image-1.png",
        }
    ]
    assert f"Parent: {hub_url}/jobs/{parent.pk}/" in story.human_line(told)


def test_an_mp4_told_twice_keeps_one_story_and_plays(member, device, media, hub_url, tmp_path):
    job = make_job(member, device, kind="video", state="running", prompt=PROMPT)
    mp4 = emu.video_mp4(prompt="x", seconds=1, width=64, height=48, fps=8, audio=False).read_bytes()
    once = stored_bytes(store.save_artifact(job, kind="video", name="video.mp4", data=mp4, mime="video/mp4"))
    twice = stored_bytes(
        store.save_artifact(job, kind="video", name="video.mp4", data=once, mime="video/mp4")
    )
    assert twice.count(b"\xa9cmt") == 1 and twice.count(b"desc") == 1 and len(twice) == len(once)
    path = tmp_path / "twice.mp4"
    path.write_bytes(twice)
    assert decodes_cleanly(path) == ""
    assert json.loads(ffmpeg_metadata(path)["comment"])["job"] == job.pk
    assert ffmpeg_metadata(path)["encoder"]  # the muxer's own tag is kept beside the hub's


def test_a_jpeg_tells_its_settings_in_a_comment(member, device, media, hub_url):
    job = make_job(member, device, kind="image", state="running", prompt=PROMPT)
    picture = BytesIO()
    Image.new("RGB", (32, 24), (200, 80, 20)).save(picture, "JPEG")
    art = store.save_artifact(job, kind="image", name="image.jpg", data=picture.getvalue(), mime="image/jpeg")
    with Image.open(BytesIO(stored_bytes(art))) as img:
        img.load()
        assert img.size == (32, 24)
        assert json.loads(img.info["comment"])["prompt"] == PROMPT


def test_an_obj_tells_its_settings_in_a_comment_line(member, device, media, hub_url):
    job = make_job(member, device, kind="mesh", state="running")
    obj = b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n"
    art = store.save_artifact(job, kind="mesh", name="model.obj", data=obj, mime="text/plain")
    first, rest = stored_bytes(art).split(b"\n", 1)
    assert first.startswith(b"# tiiny-hub: ") and json.loads(first[13:])["job"] == job.pk
    assert rest == obj


def test_a_png_that_is_broken_or_a_bomb_reads_as_no_story():
    import zlib

    from jobs.files.story_formats import PNG_SIGNATURE, _png_chunk

    good = emu.png_bytes(prompt="x", width=16, height=16)
    bomb = _png_chunk(b"iTXt", b"tiiny-hub\x00\x01\x00\x00\x00" + zlib.compress(b"{" * 50_000_000, 9))
    cases = [
        b"",
        PNG_SIGNATURE,
        PNG_SIGNATURE + b"\x00\x00",
        PNG_SIGNATURE + b"\xff\xff\xff\xffiTXt",  # a chunk longer than the file
        PNG_SIGNATURE + _png_chunk(b"iTXt", b"tiiny-hub\x00\x00\x00\x00\x00[1, 2]"),  # JSON, not an object
        PNG_SIGNATURE + _png_chunk(b"iTXt", b"tiiny-hub\x00\x00\x00\x00\x00\xff\xfe"),  # not UTF-8
        PNG_SIGNATURE + bomb,
        good,
    ]
    for data in cases:
        assert story.read_story(data) is None
    assert story.read_story(BytesIO(good)) is None
