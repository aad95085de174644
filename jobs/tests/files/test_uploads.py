"""Uploads are decoded, not sniffed: Pillow decodes images (bounded pixels), the stdlib parses WAVs."""

from __future__ import annotations

import io
import struct
import wave
import zlib

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image

from jobs.kinds.forms import clean_image_upload, clean_wav_upload
from jobs.models import Job
from jobs.tests.ui_fixtures import MESH, PNG


def image_bytes(fmt: str, size=(8, 6)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (10, 120, 200)).save(buf, format=fmt)
    return buf.getvalue()


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def bomb_png(width: int = 20_000, height: int = 20_000) -> bytes:
    """A valid, tiny PNG that declares width×height: a few hundred bytes that would decode to 1.2 GB."""
    raw = zlib.compress(b"\x00" * (1 + width), 9)  # one scanline is enough to look real
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    return (
        b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + png_chunk(b"IDAT", raw) + png_chunk(b"IEND", b"")
    )


def wav_bytes(*, channels=1, rate=16_000, width=2, seconds=0.5) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(b"\x01\x00" * int(rate * seconds) * channels * (width // 2 or 1))
    return buf.getvalue()


def upload(data: bytes, name="x.png", mime="image/png"):
    return SimpleUploadedFile(name, data, mime)


def refused_image(data: bytes) -> str:
    with pytest.raises(ValidationError) as info:
        clean_image_upload(upload(data), label="The picture")
    return info.value.messages[0]


# --- images -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fmt", "mime"), [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp")]
)
def test_a_real_image_passes_with_its_type_and_size(fmt, mime):
    f = clean_image_upload(upload(image_bytes(fmt), name="whatever.bin", mime="application/octet-stream"))
    assert f.sniffed_mime == mime and f.image_size == (8, 6)
    assert f.read(4) == image_bytes(fmt)[:4]  # rewound for whoever stores it


def test_the_shared_fixture_png_is_a_real_one():
    assert clean_image_upload(upload(PNG)).image_size == (1, 1)


def test_a_png_header_followed_by_junk_is_refused():
    message = refused_image(b"\x89PNG\r\n\x1a\n" + b"\x00" * 32)
    assert message.startswith("The picture must be a PNG, JPEG or WebP image")


def test_a_truncated_png_is_refused():
    whole = image_bytes("PNG", size=(64, 64))
    assert "damaged or cut short" in refused_image(whole[: len(whole) // 2])


def test_a_png_with_a_bad_checksum_is_refused():
    assert "damaged or cut short" in refused_image(PNG.replace(b"\xc9\xfe\x92\xef", b"\x00\x00\x00\x00"))


def test_a_truncated_jpeg_is_refused():
    buf = io.BytesIO()
    Image.effect_noise((256, 256), 64).convert("RGB").save(buf, format="JPEG", quality=95)
    whole = buf.getvalue()
    assert "damaged or cut short" in refused_image(whole[: len(whole) // 2])


def test_a_decompression_bomb_is_refused_before_decoding(settings):
    bomb = bomb_png()
    assert len(bomb) < 2_000
    message = refused_image(bomb)
    assert "pixels" in message and f"{settings.HUB_IMAGE_MAX_MP} MP" in message


def test_an_image_just_over_the_pixel_limit_gets_its_size_named(settings):
    side = int((settings.HUB_IMAGE_MAX_MP * 10**6) ** 0.5) + 10
    assert f"{side}×{side} pixels" in refused_image(bomb_png(side, side))


def test_gif_and_other_formats_pillow_knows_are_still_refused():
    assert refused_image(image_bytes("GIF")) == "The picture must be a PNG, JPEG or WebP image."
    assert refused_image(image_bytes("BMP")) == "The picture must be a PNG, JPEG or WebP image."


def test_an_empty_file_is_refused():
    assert refused_image(b"").startswith("The picture must be a PNG, JPEG or WebP image")


def test_a_file_over_the_byte_limit_is_refused_unread():
    big = upload(b"\x89PNG" + b"\x00" * (10 * 1024 * 1024))
    with pytest.raises(ValidationError, match="the limit is 10 MB"):
        clean_image_upload(big, label="The picture")


# --- WAV ------------------------------------------------------------------------------------------------
def refused_wav(data: bytes) -> str:
    with pytest.raises(ValidationError) as info:
        clean_wav_upload(upload(data, name="r.wav", mime="audio/wav"))
    return info.value.messages[0]


def test_a_real_wav_passes():
    f = clean_wav_upload(upload(wav_bytes(), name="r.wav", mime="audio/wav"))
    assert f.sniffed_mime == "audio/wav"


def test_a_riff_wave_header_with_garbage_is_refused():
    assert "uncompressed PCM WAV" in refused_wav(b"RIFF\x00\x00\x00\x00WAVE" + b"\xde\xad\xbe\xef" * 20)


def test_a_fake_wav_is_refused():
    assert refused_wav(b"ID3\x03 an mp3 really" + b"\x00" * 64) == "The recording must be a WAV file."
    assert "uncompressed PCM WAV" in refused_wav(b"RIFF\x24\x00\x00\x00WAVEfmt ")


def test_a_wav_whose_header_promises_more_than_it_holds_is_refused():
    whole = wav_bytes(seconds=1)
    assert "cut short" in refused_wav(whole[: len(whole) // 3])


def test_a_wav_with_insane_parameters_is_refused():
    data = bytearray(wav_bytes())
    struct.pack_into("<I", data, 24, 1_000_000)  # the fmt chunk's sample rate
    assert "1000000 Hz" in refused_wav(bytes(data))


def test_an_empty_wav_is_refused():
    assert "no sound" in refused_wav(wav_bytes(seconds=0))


def test_a_float_wav_gets_a_clear_message():
    data = bytearray(wav_bytes())
    struct.pack_into("<H", data, 20, 3)  # WAVE_FORMAT_IEEE_FLOAT
    assert "uncompressed PCM WAV" in refused_wav(bytes(data))


# --- through the page -------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_the_new_job_page_refuses_a_bomb_with_the_message_and_queues_nothing(member_client, device, media):
    response = member_client.post(
        "/jobs/new/",
        {"device": device.pk, "kind": "mesh", "model": MESH, "when": "asap", "image": upload(bomb_png())},
    )
    assert 400 <= response.status_code < 500
    assert "more pixels than the limit" in response.content.decode()
    assert Job.objects.count() == 0


@pytest.mark.django_db
def test_the_api_refuses_junk_after_a_png_header_as_json(member_client, device, media):
    response = member_client.post(
        "/api/jobs",
        {
            "device": device.pk,
            "kind": "mesh",
            "model": MESH,
            "image": upload(b"\x89PNG\r\n\x1a\n" + b"junk" * 9),
        },
    )
    assert response.status_code in (400, 422), response.content
    assert "PNG, JPEG or WebP" in response.content.decode()
    assert Job.objects.count() == 0
