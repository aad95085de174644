"""Thumbnails, a job's inputs and its live preview: made from real media, served under the job's access rules.

The media are real (``devices.emulator.media``: H.264 MP4, PCM WAV, MP3, PNG, GLB), so a thumbnail that
decodes here decodes in a browser. The TensorSharp tests run the runner in this process against the
emulator over HTTP: the preview file and the thumbnail are what a worker would leave on disk.
"""

from __future__ import annotations

import io
import logging
import math
import struct
import wave
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client
from PIL import Image, ImageStat

from devices.emulator.media import glb_bytes, mp3_bytes, png_bytes, video_mp4, wav_bytes
from jobs.files.previews import keep_preview, preview_from_frame
from jobs.files.store import preview_name, save_artifact
from jobs.files.thumbnails import (
    BAR_COLOUR,
    THUMB_NAME,
    THUMB_SIZE,
    audio_peaks,
    thumbnail_for_job,
    thumbnail_source,
)
from jobs.models import Artifact
from jobs.tests.ui_fixtures import add_artifact, make_job

pytestmark = pytest.mark.django_db


def _png(colour=(200, 30, 30), size=(640, 400)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return buf.getvalue()


def _wav(amplitudes: list[float], *, rate: int = 8000, width: int = 2, channels: int = 1) -> bytes:
    """A sine at 440 Hz, one second per amplitude (0..1 of full scale)."""
    full = 2 ** (8 * width - 1) - 1
    frames = bytearray()
    for amp in amplitudes:
        for n in range(rate):
            v = int(full * amp * math.sin(2 * math.pi * 440 * n / rate))
            for _ in range(channels):
                frames += bytes([(v + 128) & 0xFF]) if width == 1 else struct.pack("<h", v)
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(bytes(frames))
    return buf.getvalue()


def _inputs(job, media, files: dict[str, tuple[str, bytes]]) -> None:
    """Inputs placed the way ``jobs.queue.services._save_uploads`` places them."""
    rels = {}
    for name, (filename, data) in files.items():
        rel = f"results/{job.owner_id}/{job.pk}/inputs/{filename}"
        path = Path(media) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        rels[name] = rel
    job.params = {**job.params, "files": rels}
    job.save(update_fields=["params"])


def _thumb(job) -> Image.Image:
    art = job.artifacts.get(kind=Artifact.Kind.THUMB)
    assert art.name == THUMB_NAME and art.mime == "image/webp" and len(art.sha256) == 64
    im = Image.open(Path(art.file.path))
    assert im.format == "WEBP" and im.size == THUMB_SIZE
    return im.convert("RGB")


def _accent_share(im: Image.Image) -> float:
    raw = im.tobytes()
    pixels = zip(raw[0::3], raw[1::3], raw[2::3], strict=True)
    near = sum(1 for px in pixels if sum(abs(a - b) for a, b in zip(px, BAR_COLOUR, strict=True)) < 60)
    return near / (im.width * im.height)


# -- each kind of result: saved, then the thumbnail task of the done job ------------------------------------------
def _save(job, **kw):
    """A result saved as the runner saves it, then the job's thumbnail as the task makes it once it is done."""
    art = save_artifact(job, **kw)
    thumbnail_for_job(job)
    return art


def test_a_video_gets_a_poster_frame(member, device, media):
    job = make_job(member, device, state="running", prompt="a kite over the dunes")
    mp4 = video_mp4(prompt=job.prompt, seconds=2, width=320, height=192, fps=12)
    _save(job, kind="video", name="video.mp4", data=mp4.read_bytes(), mime="video/mp4")
    im = _thumb(job)
    assert max(ImageStat.Stat(im).stddev) > 10  # a real frame (gradient and text), not a flat fill


def test_a_3d_model_shows_its_source_picture(member, device, media):
    job = make_job(member, device, kind="mesh", state="running")
    _inputs(job, media, {"image": ("image.png", _png((200, 30, 30)))})
    _save(job, kind="mesh", name="model.glb", data=glb_bytes(), mime="model/gltf-binary")
    r, g, b = ImageStat.Stat(_thumb(job)).mean
    assert r > 170 and g < 60 and b < 60


def test_a_3d_model_without_its_picture_gets_no_thumbnail_and_still_saves(member, device, media, caplog):
    job = make_job(member, device, kind="mesh", state="running")
    with caplog.at_level(logging.WARNING, logger="jobs.files.thumbnails"):
        art = _save(job, kind="mesh", name="model.glb", data=glb_bytes(), mime="model/gltf-binary")
    assert art.pk and not job.artifacts.filter(kind="thumb").exists()
    assert "no thumbnail from model.glb" in caplog.text


@pytest.mark.parametrize("kind", ["music", "speech"])
def test_audio_gets_a_waveform_in_the_accent_colour(member, device, media, kind):
    job = make_job(member, device, kind=kind, state="running")
    _save(job, kind="audio", name="song.wav", data=wav_bytes(seconds=3, kind=kind), mime="audio/wav")
    assert _accent_share(_thumb(job)) > 0.05


def test_an_mp3_is_decoded_for_its_waveform(member, device, media):
    job = make_job(member, device, kind="speech", state="running")
    _save(job, kind="audio", name="speech.mp3", data=mp3_bytes(seconds=2), mime="audio/mpeg")
    assert _accent_share(_thumb(job)) > 0.05


def test_silence_draws_flat_bars(member, device, media):
    job = make_job(member, device, kind="speech", state="running")
    _save(job, kind="audio", name="speech.wav", data=_wav([0.0, 0.0]), mime="audio/wav")
    assert 0 < _accent_share(_thumb(job)) < 0.03


def test_waveform_bars_follow_the_loudness(tmp_path):
    path = tmp_path / "a.wav"
    path.write_bytes(_wav([0.25, 1.0], channels=2))
    peaks = audio_peaks(path, bars=4)
    assert peaks[0] == pytest.approx(0.25, abs=0.03) and peaks[-1] == pytest.approx(1.0, abs=0.03)
    path.write_bytes(_wav([0.5, 0.5], width=1))  # 8-bit WAV is unsigned
    assert audio_peaks(path, bars=4) == pytest.approx([0.5] * 4, abs=0.05)


def test_an_image_shows_itself_once_for_several(member, device, media):
    job = make_job(member, device, kind="image", state="running")
    _save(job, kind="image", name="image-1.png", data=_png((20, 160, 40)), mime="image/png")
    first = job.artifacts.get(kind="thumb")
    _save(job, kind="image", name="image-2.png", data=_png((20, 20, 200)), mime="image/png")
    assert job.artifacts.get(kind="thumb").pk == first.pk  # image-1 is the picture; image-2 left it alone
    r, g, b = ImageStat.Stat(_thumb(job)).mean
    assert g > 130 and r < 60


def test_a_sidecar_makes_no_thumbnail_and_a_broken_video_never_fails_the_save(member, device, media, caplog):
    job = make_job(member, device, state="running")
    _save(job, kind="sidecar", name="audio.wav", data=_wav([0.5]), mime="audio/wav")
    assert not job.artifacts.filter(kind="thumb").exists()
    with caplog.at_level(logging.WARNING, logger="jobs.files.thumbnails"):
        art = _save(job, kind="video", name="video.mp4", data=b"\x00\x00\x00\x18ftypmp42", mime="video/mp4")
    assert art.pk and not job.artifacts.filter(kind="thumb").exists()
    assert "no thumbnail from video.mp4" in caplog.text


def test_the_backfill_makes_the_missing_ones(member, device, media, capsys):

    old = make_job(member, device, kind="image", state="done")
    add_artifact(
        old,
        media,
        kind="image",
        name="image-1.png",
        mime="image/png",
        data=png_bytes(prompt="x", width=64, height=40),
    )
    art = thumbnail_source(old)
    assert art.name == "image-1.png" and not old.artifacts.filter(kind="thumb").exists()
    call_command("make_thumbnails")
    assert old.artifacts.filter(kind="thumb").count() == 1
    call_command("make_thumbnails")  # again: nothing to do
    assert old.artifacts.filter(kind="thumb").count() == 1
    assert "made 0 thumbnail(s); 1 job(s) had one" in capsys.readouterr().out


# -- pages: the gallery card, the result list ------------------------------------------------------------------
def test_the_gallery_card_shows_the_thumbnail_with_its_size(member_client, member, device, media):
    job = make_job(member, device, kind="image", state="done", prompt="a green field")
    _save(job, kind="image", name="image-1.png", data=_png(), mime="image/png")
    bare = make_job(member, device, state="done", prompt="no picture yet")
    html = member_client.get("/jobs/").content.decode()
    thumb = job.artifacts.get(kind="thumb")
    assert (
        f'<img src="/jobs/{job.pk}/files/{thumb.pk}/" alt="a green field" loading="lazy" decoding="async" '
        'width="480" height="300">'
    ) in html
    card = html.split(f'id="job-{bare.pk}-card"')[1].split("</li>")[0]
    assert "media-placeholder" in card and "<img" not in card


def test_the_thumbnail_is_not_offered_as_a_download(member_client, member, device, media):
    job = make_job(member, device, kind="image", state="done")
    _save(job, kind="image", name="image-1.png", data=_png(), mime="image/png")
    html = member_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "image-1.png" in html and THUMB_NAME not in html


# -- access: thumbnails and inputs follow the job's visibility exactly ------------------------------------------
@pytest.fixture
def job_with_media(member, device, media):
    job = make_job(member, device, kind="speech", state="done", prompt="hello there")
    _inputs(job, media, {"ref_audio": ("ref_audio.wav", _wav([0.5]))})
    _save(job, kind="audio", name="speech.wav", data=wav_bytes(seconds=1, kind="speech"), mime="audio/wav")
    return job, job.artifacts.get(kind="thumb")


def _urls(job, thumb):
    return [f"/jobs/{job.pk}/files/{thumb.pk}/", f"/jobs/{job.pk}/inputs/ref_audio/"]


def test_the_owner_and_admins_get_them_another_member_does_not(
    job_with_media, member_client, other_client, admin_client
):
    job, thumb = job_with_media
    for url in _urls(job, thumb):
        owner = member_client.get(url)
        assert owner.status_code == 200 and owner["Accept-Ranges"] == "bytes", url
        assert admin_client.get(url).status_code == 200, url
        assert other_client.get(url).status_code == 404, url
    assert member_client.get(_urls(job, thumb)[0])["Content-Type"] == "image/webp"
    voice = member_client.get(_urls(job, thumb)[1], HTTP_RANGE="bytes=0-3")
    assert voice.status_code == 206 and voice["Content-Type"] == "audio/wav"
    assert b"".join(voice.streaming_content) == b"RIFF"


def test_shared_jobs_show_them_to_the_household_and_the_link_to_anyone(job_with_media, other_client, member):
    job, thumb = job_with_media
    job.shared, job.share_token = True, "tok-" + "x" * 20
    job.save(update_fields=["shared", "share_token"])
    for url in _urls(job, thumb):
        assert other_client.get(url).status_code == 200, url
    anon = Client()
    assert anon.get(f"/jobs/shared/{job.share_token}/inputs/ref_audio/").status_code == 200
    assert anon.get(f"/jobs/shared/{job.share_token}/files/{thumb.pk}/").status_code == 200
    assert anon.get("/jobs/shared/wrong-token/inputs/ref_audio/").status_code == 404
    page = anon.get(f"/jobs/shared/{job.share_token}/").content.decode()
    assert "Voice reference" in page and f'src="/jobs/shared/{job.share_token}/inputs/ref_audio/"' in page


def test_anonymous_visitors_are_sent_to_sign_in(job_with_media):
    job, thumb = job_with_media
    for url in [*_urls(job, thumb), f"/jobs/{job.pk}/preview/", f"/jobs/{job.pk}/preview/box/"]:
        response = Client().get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"], url


def test_an_input_path_outside_its_folder_is_never_served(member_client, member, device, media, tmp_path):
    job = make_job(member, device, kind="mesh", state="done")
    secret = Path(media) / "results" / str(member.pk) / "secret.txt"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text("another job's data")
    other = Path(media) / "results" / str(member.pk) / str(job.pk + 1) / "inputs" / "image.png"
    other.parent.mkdir(parents=True, exist_ok=True)
    other.write_bytes(_png())
    inside = Path(media) / "results" / str(member.pk) / str(job.pk) / "inputs"
    inside.mkdir(parents=True, exist_ok=True)
    (inside / "link.png").symlink_to(secret)
    tries = {
        "image": f"results/{member.pk}/{job.pk}/inputs/../../secret.txt",
        "start_image": f"results/{member.pk}/{job.pk + 1}/inputs/image.png",  # someone else's job
        "end_image": str(secret),  # absolute
        "ref_audio": f"results/{member.pk}/{job.pk}/inputs/link.png",  # a symlink out of the folder
    }
    job.params = {**job.params, "files": tries}
    job.save(update_fields=["params"])
    for name in tries:
        assert member_client.get(f"/jobs/{job.pk}/inputs/{name}/").status_code == 404, name
    assert member_client.get(f"/jobs/{job.pk}/inputs/..%2F..%2Fsecret.txt/").status_code == 404
    assert member_client.get(f"/jobs/{job.pk}/inputs/nothing/").status_code == 404
    html = member_client.get(f"/jobs/{job.pk}/").content.decode()
    assert f'id="job-{job.pk}-inputs"' not in html and "/inputs/" not in html and "another job" not in html


def test_the_job_page_shows_each_input_with_its_label(member_client, member, device, media):
    job = make_job(member, device, kind="video", state="queued")
    _inputs(job, media, {"start_image": ("start_image.png", _png())})
    mesh = make_job(member, device, kind="mesh", state="done")
    _inputs(mesh, media, {"image": ("image.jpg", _png())})
    speech = make_job(member, device, kind="speech", state="done")
    _inputs(speech, media, {"ref_audio": ("ref_audio.wav", _wav([0.3]))})
    html = member_client.get(f"/jobs/{job.pk}/").content.decode()
    assert (
        "Start image" in html and f'<img src="/jobs/{job.pk}/inputs/start_image/" alt="Start image"' in html
    )
    assert "3D source image" in member_client.get(f"/jobs/{mesh.pk}/").content.decode()
    html = member_client.get(f"/jobs/{speech.pk}/").content.decode()
    assert "Voice reference" in html
    assert f'<audio controls preload="metadata" src="/jobs/{speech.pk}/inputs/ref_audio/"' in html


# -- the live preview ------------------------------------------------------------------------------------------
@pytest.fixture
def ts_job(member, device, media):
    from devices.models import Device

    Device.objects.filter(pk=device.pk).update(kind="tensorsharp")
    device.refresh_from_db()
    return make_job(member, device, kind="image", state="running", prompt="make it snow")


def test_a_frame_preview_is_read_only_from_a_picture_data_url():
    import base64

    png = _png(size=(8, 8))
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    assert preview_from_frame({"imageEdit": True, "step": 1, "image": url}) == png
    assert preview_from_frame({"videoGen": True, "preview": url}) == png
    assert preview_from_frame({"image": None}) is None
    assert preview_from_frame({"image": "data:text/html;base64,PGI+"}) is None
    assert (
        preview_from_frame({"image": "data:image/png;base64," + base64.b64encode(b"<svg>").decode()}) is None
    )


def test_the_preview_box_polls_the_hub_and_answers_204_while_nothing_changed(
    ts_job, member_client, other_client
):
    job = ts_job
    html = member_client.get(f"/jobs/{job.pk}/").content.decode()
    box = html.split(f'id="job-{job.pk}-preview"')[1].split("</section>")[0]
    assert 'hx-trigger="every 2s"' in box and " hidden" in box and "<img" not in box  # nothing yet
    assert member_client.get(f"/jobs/{job.pk}/preview/").status_code == 404
    assert member_client.get(f"/jobs/{job.pk}/preview/box/?v=&m=a").status_code == 204

    keep_preview(job, _png(size=(16, 16)))
    box = member_client.get(f"/jobs/{job.pk}/preview/box/?v=&m=a")
    assert box.status_code == 200 and b'class="live-preview"' in box.content
    version = box.content.decode().split(f"/jobs/{job.pk}/preview/?v=")[1].split('"')[0]
    assert member_client.get(f"/jobs/{job.pk}/preview/box/?v={version}&m=a").status_code == 204
    image = member_client.get(f"/jobs/{job.pk}/preview/?v={version}")
    assert image.status_code == 200 and image["Content-Type"] == "image/png"
    assert image["Cache-Control"] == "private, no-cache"
    assert other_client.get(f"/jobs/{job.pk}/preview/").status_code == 404
    assert other_client.get(f"/jobs/{job.pk}/preview/box/").status_code == 404

    job.state = "done"
    job.save(update_fields=["state"])
    done = member_client.get(f"/jobs/{job.pk}/preview/box/?v={version}&m=a")
    assert done.status_code == 200 and done.content == b""  # the box goes; the result takes its place
    assert f'id="job-{job.pk}-preview"' not in member_client.get(f"/jobs/{job.pk}/").content.decode()


def test_a_waiting_job_listens_for_pushes_instead_of_polling(ts_job, member_client):
    ts_job.state = "queued"
    ts_job.save(update_fields=["state"])
    html = member_client.get(f"/jobs/{ts_job.pk}/").content.decode()
    assert 'hx-trigger="htmx:wsAfterMessage from:body throttle:2s"' in html
    assert member_client.get(f"/jobs/{ts_job.pk}/preview/box/?v=&m=w").status_code == 204
    assert member_client.get(f"/jobs/{ts_job.pk}/preview/box/?v=&m=a").status_code == 200  # mode changed


def test_a_tiiny_job_has_no_preview_box(member_client, member, device):
    job = make_job(member, device, state="running")
    assert f'id="job-{job.pk}-preview"' not in member_client.get(f"/jobs/{job.pk}/").content.decode()


@pytest.mark.integration
def test_the_tensorsharp_runner_keeps_the_latest_preview_and_makes_the_thumbnail(member, media):
    """In-process, against the emulator over HTTP: the worker's side of the preview and the collect hook."""
    from devices.emulator.testing import run_tensorsharp
    from jobs.kinds.table import runner_for
    from jobs.models import Job
    from jobs.tests.conftest import make_device

    with run_tensorsharp(speed=3000, model="qwen-image-edit") as emu:
        device = make_device(emu, kind="tensorsharp", name="Editor")
        job = Job.objects.create(
            owner=member,
            device=device,
            kind="image",
            model_id=device.capabilities["tensorsharp"]["loaded"],
            params={"prompt": "make it snow", "steps": 4},
            prompt="make it snow",
            state="running",
        )
        _inputs(job, media, {"image": ("image.png", _png((30, 90, 160), size=(64, 48)))})
        seen: list[tuple[float, int, str]] = []

        def progress(pct: float, phase: str) -> bool:
            path = Path(media) / preview_name(job)
            if path.exists():
                with Image.open(path) as im:
                    seen.append((pct, path.stat().st_mtime_ns, im.format))
            return False

        runner = runner_for(job)
        with runner.client:
            runner.prepare(polite=True)
            runner.execute(progress)
    assert len(seen) >= 3 and {fmt for _, _, fmt in seen} == {"PNG"}  # a whole picture every time
    assert len({stamp for _, stamp, _ in seen}) >= 3  # replaced as new previews arrived
    assert not (Path(media) / preview_name(job)).exists()  # the result replaced it
    thumbnail_for_job(job)  # what the done job's task does
    assert sorted(a.name for a in job.artifacts.all()) == ["image.png", THUMB_NAME]
    assert _thumb(job).size == THUMB_SIZE


def test_the_sweep_queues_the_thumbnails_whose_task_was_lost(member, device, media, monkeypatch):
    """The thumbnail task is queued at a job's end; when the broker drops it, beat's sweep queues it again for
    the jobs done a while ago (not those whose task may still be coming), and never for one that has it."""
    import datetime as dt

    from django.utils import timezone

    from jobs import tasks
    from jobs.models import Job

    queued: list[int] = []
    monkeypatch.setattr(tasks.make_thumbnail, "delay", lambda job_id: queued.append(job_id))
    now = timezone.now()

    def done_image(ago: dt.timedelta, **kw):
        job = make_job(member, device, kind="image", state="done", **kw)
        Job.objects.filter(pk=job.pk).update(finished_at=now - ago)
        add_artifact(job, media, kind="image", name="image-1.png", mime="image/png", data=_png())
        return job

    lost = done_image(dt.timedelta(minutes=10))
    just_done = done_image(dt.timedelta(seconds=20))
    done_image(dt.timedelta(days=2))  # long ago: manage.py make_thumbnails is the way
    had = done_image(dt.timedelta(minutes=10))
    thumbnail_for_job(had)
    make_job(member, device, kind="image", state="failed")

    assert tasks.sweep_thumbnails() == 1
    assert queued == [lost.pk]
    tasks.make_thumbnail.run(lost.pk)  # the task itself, as the worker runs it
    assert lost.artifacts.filter(kind="thumb").count() == 1
    assert not just_done.artifacts.filter(kind="thumb").exists()
    assert tasks.sweep_thumbnails() == 0
