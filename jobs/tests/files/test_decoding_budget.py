"""Issue 34 item 7: pictures are decoded within a budget. The size is read from the header and checked before any
pixel is decoded, the budget follows the profile (the small one's much lower than 40 MP), and a process decodes
only so many at once."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image

from hub import profile
from jobs.files import decoding, thumbnails
from jobs.kinds.forms import clean_image_upload
from jobs.tests.doors.test_bad_input import video_post
from jobs.tests.files.test_uploads import bomb_png
from jobs.tests.ui_fixtures import device  # noqa: F401 - a fixture

BASE = Path(__file__).resolve().parents[3]


def upload(data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile("photo.png", data, "image/png")


def refused(data: bytes) -> str:
    with pytest.raises(ValidationError) as info:
        clean_image_upload(upload(data), label="The picture")
    return info.value.messages[0]


@pytest.fixture
def small_budget(settings):
    settings.HUB_IMAGE_MAX_MP = profile.choose("small").image_max_mp
    settings.HUB_IMAGE_DECODES = profile.choose("small").image_decodes


def test_a_picture_over_the_small_profiles_budget_is_refused_from_its_header_alone(small_budget):
    # 6300×6300 declared, one scanline of body: decoding would end in "damaged or cut short", not in its size.
    bomb = bomb_png(6300, 6300)
    assert len(bomb) < 2_000
    assert refused(bomb) == "The picture is 6300×6300 pixels (40 MP); the limit is 16 MP."


def test_a_phone_photo_passes_the_small_profiles_budget(small_budget):
    buf = io.BytesIO()
    Image.new("RGB", (4032, 3024), (200, 180, 150)).save(buf, format="JPEG", quality=80)
    f = clean_image_upload(SimpleUploadedFile("p.jpg", buf.getvalue(), "image/jpeg"))
    assert f.image_size == (4032, 3024) and f.sniffed_mime == "image/jpeg"


def test_a_truncated_jpeg_is_still_refused_when_decoded_at_an_eighth(small_budget):
    buf = io.BytesIO()
    Image.effect_noise((2048, 1536), 64).convert("RGB").save(buf, format="JPEG", quality=95)
    whole = buf.getvalue()
    assert "damaged or cut short" in refused(whole[: len(whole) * 3 // 4])


def test_the_submit_page_names_the_picture_and_the_limit(member_client, device, small_budget):  # noqa: F811
    data = {**video_post(device), "start_image": upload(bomb_png(6300, 6300))}
    answer = member_client.post("/jobs/new/", data)
    assert answer.status_code == 400
    assert "The start image is 6300×6300 pixels (40 MP); the limit is 16 MP." in answer.content.decode()


def test_a_decode_waits_for_a_free_slot_and_is_refused_when_none_frees(settings, monkeypatch):
    settings.HUB_IMAGE_DECODES = 1
    monkeypatch.setattr(decoding, "DECODE_WAIT_S", 0.01)
    buf = io.BytesIO()
    Image.new("RGB", (64, 64)).save(buf, format="PNG")
    held, release = threading.Event(), threading.Event()

    def another_decode() -> None:
        with decoding.decode_slot():
            held.set()
            release.wait()

    other = threading.Thread(target=another_decode)
    other.start()
    try:
        held.wait()
        assert "busy with other pictures" in refused(buf.getvalue())
    finally:
        release.set()
        other.join()
    assert clean_image_upload(upload(buf.getvalue())).image_size == (64, 64)


def _settings_under(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "DJANGO"))}
    clean.update(HUB_SECRET_KEY="x", DJANGO_SETTINGS_MODULE="hub.settings", **env)
    code = "from django.conf import settings as s; print(s.HUB_IMAGE_MAX_MP, s.HUB_IMAGE_DECODES)"
    out = subprocess.run([sys.executable, "-c", code], cwd=BASE, env=clean, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_budget_follows_the_profile_unless_set():
    assert _settings_under(HUB_PROFILE="small") == "16 1"
    assert _settings_under(HUB_PROFILE="standard") == "40 2"
    assert _settings_under(HUB_PROFILE="small", HUB_IMAGE_MAX_MP="24", HUB_IMAGE_DECODES="3") == "24 3"


def test_a_thumbnail_is_not_made_from_a_result_over_the_budget(small_budget, tmp_path):
    path = tmp_path / "result.png"
    path.write_bytes(bomb_png(6300, 6300))
    with pytest.raises(thumbnails.ThumbnailError, match=r"6300×6300 pixels \(40 MP\); the limit is 16 MP"):
        thumbnails.still_image(path)
