"""The checks of an uploaded file: bounded in size, and its bytes decode as what the form asks for.

The name and the browser's type are ignored: a picture must decode as PNG, JPEG or WebP (whole, and not a
decompression bomb), a recording must be a PCM WAV the standard library can read.
"""

from __future__ import annotations

import io
import struct
import warnings
import wave
from typing import Any

from django.core.exceptions import ValidationError
from PIL import Image, UnidentifiedImageError

from jobs.files import decoding

MAX_IMAGE_BYTES = 10 * 1024 * 1024
MAX_AUDIO_BYTES = 10 * 1024 * 1024
IMAGE_TYPES = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp"}
AUDIO_TYPES = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav", "audio/vnd.wave": "wav"}


IMAGE_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp"}
# Reference recordings for voice cloning: a few seconds to a few minutes of speech.
WAV_CHANNELS = range(1, 9)
WAV_RATES = range(8_000, 192_001)
WAV_MAX_SECONDS = 600


def _read_bounded(f, limit: int, label: str) -> bytes:
    if f.size > limit:
        raise ValidationError(f"{label} is {f.size / 1e6:.1f} MB; the limit is {limit // 10**6} MB.")
    f.seek(0)
    data = f.read(limit + 1)
    f.seek(0)
    if len(data) > limit:  # f.size comes from the upload handler; trust the bytes read
        raise ValidationError(f"{label} is over {limit // 10**6} MB, the limit.")
    return data


def _decode_image(data: bytes, label: str) -> tuple[str, tuple[int, int]]:
    """Decode the whole image with Pillow within the budget (jobs.files.decoding): its size is read from the
    header and checked before any pixel is decoded, and the decode waits for one of the process's decode slots."""
    kind = f"{label} must be a PNG, JPEG or WebP image"
    try:
        with warnings.catch_warnings():
            # Pillow warns above its own limit (~89 MP) and raises above twice that; both are a refusal.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=list(IMAGE_FORMATS)) as probe:
                fmt, size = probe.format, probe.size  # from the header: nothing is decoded yet
                decoding.check_pixels(size)
                probe.verify()  # structure and checksums (PNG chunks' CRCs), no pixels
            with decoding.decode_slot(), Image.open(io.BytesIO(data), formats=list(IMAGE_FORMATS)) as image:
                _decode_all(image, size)
    except decoding.TooManyPixels as big:
        raise ValidationError(f"{label} is {big.text}.") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ValidationError(
            f"{label} declares more pixels than the limit of {decoding.pixel_budget() // 10**6} MP."
        ) from None
    except decoding.DecodersBusy:
        raise ValidationError(
            f"{label} can't be checked right now: the hub is busy with other pictures. Try again in a minute."
        ) from None
    except UnidentifiedImageError:
        raise ValidationError(f"{kind}.") from None
    except Exception:  # noqa: BLE001 - Pillow raises many types (OSError, SyntaxError, struct.error, …) on bad bytes
        raise ValidationError(f"{kind}; this one is damaged or cut short and can't be decoded.") from None
    return IMAGE_FORMATS[fmt], size


def _decode_all(image: Image.Image, size: tuple[int, int]) -> None:
    """Every byte of the picture through its decoder: a truncated or corrupt body fails here. A JPEG is decoded
    at an eighth of its width and height (``draft``: the decoder's own DCT scaling), which reads the whole stream
    for a 64th of the memory; PNG and WebP have no such mode and are decoded whole, within the budget."""
    if image.size != size:
        raise ValueError("size changed between two reads")
    if image.format == "JPEG":
        image.draft(image.mode, (max(1, size[0] // 8), max(1, size[1] // 8)))
    image.load()


def clean_image_upload(f, *, label: str = "The image") -> Any:
    """Bounded size, and the bytes must decode as PNG/JPEG/WebP (the name and the browser's type are ignored)."""
    if f is None:
        return None
    data = _read_bounded(f, MAX_IMAGE_BYTES, label)
    f.sniffed_mime, f.image_size = _decode_image(data, label)
    return f


def clean_wav_upload(f, *, label: str = "The recording") -> Any:
    """Bounded size, and a WAV the stdlib can parse: PCM, sane channels, rate and length, frames all there."""
    if f is None:
        return None
    data = _read_bounded(f, MAX_AUDIO_BYTES, label)
    if not (data[:4] == b"RIFF" and data[8:12] == b"WAVE"):
        raise ValidationError(f"{label} must be a WAV file.")
    try:
        with wave.open(io.BytesIO(data), "rb") as wav:
            channels, width, rate, frames = (
                wav.getnchannels(),
                wav.getsampwidth(),
                wav.getframerate(),
                wav.getnframes(),
            )
            got = len(wav.readframes(frames)) if frames else 0
    except (wave.Error, EOFError, struct.error, ValueError) as exc:
        raise ValidationError(
            f"{label} must be an uncompressed PCM WAV file (e.g. 16-bit); this one can't be read ({exc})."
        ) from None
    if channels not in WAV_CHANNELS or width not in (1, 2, 3, 4) or rate not in WAV_RATES:
        raise ValidationError(
            f"{label} has {channels} channel(s), {width * 8}-bit samples at {rate} Hz; "
            "expected 1–8 channels, 8–32-bit, 8–192 kHz."
        )
    if frames == 0 or got < frames * channels * width:
        raise ValidationError(
            f"{label} has no sound or is cut short: its header promises more than it holds."
        )
    if frames / rate > WAV_MAX_SECONDS:
        raise ValidationError(
            f"{label} is {frames / rate / 60:.0f} minutes long; at most {WAV_MAX_SECONDS // 60}."
        )
    f.sniffed_mime = "audio/wav"
    return f
