"""Thumbnails: one small picture per result, for the gallery's cards.

Made once, by the worker, right after the result file it shows is saved and checksummed
(``jobs.tasks.make_thumbnail`` calls :func:`thumbnail_for_job` once the job is done), never on a web request. It is an
``Artifact`` of kind THUMB beside the result (``thumb.webp`` in the job's folder of the store), so it is served by the
same authorizing file view and follows the job's visibility exactly.

What it shows, by the result it belongs to:

- video: a frame half a second in, cut by the bundled ffmpeg (``imageio_ffmpeg``);
- 3D model: the picture the model was made from (the job's ``image`` input);
- music and speech: a bar waveform of the samples (stdlib ``wave`` for PCM WAV, ffmpeg decodes the rest);
- image: the image itself.

Every thumbnail is exactly :data:`THUMB_SIZE` (cropped to fill, like the card's ``object-fit: cover``), so
the card can state its width and height and nothing moves when it loads. A thumbnail that can't be made is
logged and skipped: the card then shows its placeholder, and the job is done all the same.
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import subprocess
import sys
import time
import wave
from array import array
from pathlib import Path

from django.db.models import Exists, OuterRef
from PIL import Image, ImageDraw, ImageOps

from jobs.files import decoding, store
from jobs.models import Artifact, Job, JobState

logger = logging.getLogger("jobs.files.thumbnails")

#: The gallery card's media box is 16:10; 480 px wide is sharp on a 2x screen for a ~240 px card column.
THUMB_SIZE = (480, 300)
THUMB_NAME = "thumb.webp"
THUMB_MIME = "image/webp"
#: Results a thumbnail can be made from, in the order one is chosen when a job has several.
SOURCE_KINDS = (Artifact.Kind.VIDEO, Artifact.Kind.MESH, Artifact.Kind.IMAGE, Artifact.Kind.AUDIO)
#: The hub's accent colour (``--accent`` in hub.css) on a light track, as in the page's progress bars.
BAR_COLOUR = (0x24, 0x56, 0xA6)
BACKGROUND = (0xE9, 0xEE, 0xF6)
BARS = 48
FFMPEG_TIMEOUT_S = 60
POSTER_AT_S = ("0.5", "0")  # half a second in (past a fade-in), else the first frame of a shorter clip


class ThumbnailError(Exception):
    """The source can't be turned into a picture (no frame, unreadable audio, missing input)."""


# -- the collect hook --------------------------------------------------------------------------------------
def thumbnail_for_job(job: Job) -> Artifact | None:
    """The job's thumbnail, made once from the result it shows (``jobs.tasks.make_thumbnail`` runs this after
    the job is done, off the device's lease: the next job does not wait for it, nor is it counted as device time).

    Never raises: a thumbnail is a nicety, and failing to make one must never fail the job.
    """
    existing = Artifact.objects.filter(job=job, kind=Artifact.Kind.THUMB).first()
    if existing is not None:
        return existing
    source = thumbnail_source(job)
    if source is None:
        return None
    try:
        return make_thumbnail(job, source)
    except Exception:
        logger.warning("job %s: no thumbnail from %s", job.pk, source.name, exc_info=True)
        return None


def thumbnail_source(job: Job) -> Artifact | None:
    """The result a thumbnail shows: by kind (video, 3D, image, audio), then the first by name."""
    order = {kind: i for i, kind in enumerate(SOURCE_KINDS)}
    found = list(Artifact.objects.filter(job=job, kind__in=SOURCE_KINDS))
    found.sort(key=lambda a: (order[a.kind], len(a.name), a.name))
    return found[0] if found else None


def make_thumbnail(job: Job, source: Artifact) -> Artifact:
    """Draw the thumbnail of ``source`` and save it as the job's THUMB artifact (replacing an older one)."""
    started = time.monotonic()
    picture = _picture_of(job, source)
    data = encode(picture)
    thumb = store.save_artifact(job, kind=Artifact.Kind.THUMB, name=THUMB_NAME, data=data, mime=THUMB_MIME)
    logger.info(
        "job %s: thumbnail from %s (%d bytes, %.0f ms)",
        job.pk,
        source.name,
        len(data),
        (time.monotonic() - started) * 1000,
    )
    return thumb


def encode(picture: Image.Image) -> bytes:
    fitted = ImageOps.fit(picture.convert("RGB"), THUMB_SIZE, Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    fitted.save(buf, format="WEBP", quality=80, method=4)
    return buf.getvalue()


def _picture_of(job: Job, source: Artifact) -> Image.Image:
    if source.kind == Artifact.Kind.MESH:
        image = store.input_name(job, "image")
        if image is None or store.find(image) is None:
            raise ThumbnailError("the 3D model's source picture is missing")
        with store.local_path(image) as path:
            return still_image(path)
    with store.local_path(str(source.file)) as path:
        if source.kind == Artifact.Kind.VIDEO:
            return video_frame(path)
        if source.kind == Artifact.Kind.IMAGE:
            return still_image(path)
        return waveform(audio_peaks(path))


# -- pictures ------------------------------------------------------------------------------------------------
def still_image(path: Path) -> Image.Image:
    """The picture, decoded at about the size needed, within the budget (jobs.files.decoding): its size checked
    from the header first, a JPEG decoded at the smallest scale still at least twice the thumbnail
    (``thumbnail`` sets the decoder's draft mode), anything else reduced by whole factors as it is
    (``reducing_gap``) before the last, finer resampling. Turned upright only once small."""
    with Image.open(path) as im:
        try:
            decoding.check_pixels(im.size)
        except decoding.TooManyPixels as big:
            raise ThumbnailError(f"the picture is {big.text}") from None
        side = 2 * max(THUMB_SIZE)  # a square box: the picture may yet turn a quarter (exif_transpose)
        with decoding.decode_slot():
            im.thumbnail((side, side), reducing_gap=2.0)
        im = ImageOps.exif_transpose(im)  # phone photos: upright as the person saw them
        if im.mode in ("RGBA", "LA", "P"):
            im = im.convert("RGBA")
            flat = Image.new("RGB", im.size, BACKGROUND)
            flat.paste(im, mask=im.getchannel("A"))
            return flat
        return im.convert("RGB")


def video_frame(path: Path) -> Image.Image:
    """One frame of the video, 480 px wide, as a picture."""
    from imageio_ffmpeg import get_ffmpeg_exe

    problem = ""
    for at in POSTER_AT_S:
        proc = subprocess.run(
            [get_ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-nostdin", "-ss", at, "-i", str(path),
             "-frames:v", "1", "-vf", f"scale={THUMB_SIZE[0]}:-2", "-f", "image2pipe", "-c:v", "png", "pipe:1"],
            capture_output=True,
            timeout=FFMPEG_TIMEOUT_S,
            check=False,
        )  # fmt: skip
        if proc.returncode == 0 and proc.stdout:
            frame = Image.open(io.BytesIO(proc.stdout))
            frame.load()
            return frame
        problem = proc.stderr.decode(errors="replace")[-500:]
    raise ThumbnailError(f"ffmpeg found no frame: {problem}")


def audio_peaks(path: Path, *, bars: int = BARS) -> list[float]:
    """The loudest sample of each of ``bars`` equal slices, 0..1 of full scale."""
    try:
        return _wav_peaks(path, bars)
    except (wave.Error, EOFError, ThumbnailError):
        return _decoded_peaks(path, bars)  # MP3, float or 24-bit WAV: ffmpeg turns it into 16-bit PCM


def _wav_peaks(path: Path, bars: int) -> list[float]:
    with wave.open(str(path), "rb") as wav:
        width, channels, frames = wav.getsampwidth(), wav.getnchannels(), wav.getnframes()
        codes = {1: "b", 2: "h", 4: "i"}
        if width not in codes:
            raise ThumbnailError(f"{width * 8}-bit WAV")
        full = float(2 ** (8 * width - 1))
        per_bar = max(1, frames // bars)
        peaks = []
        for _ in range(bars):
            raw = wav.readframes(per_bar)
            if not raw:
                peaks.append(0.0)
                continue
            if width == 1:  # 8-bit WAV is unsigned: centre it on zero
                raw = raw.translate(_UNSIGNED_TO_SIGNED)
            peaks.append(_peak(_samples(raw, codes[width]), full, channels))
    return peaks


_UNSIGNED_TO_SIGNED = bytes((i - 128) & 0xFF for i in range(256))


def _decoded_peaks(path: Path, bars: int) -> list[float]:
    from imageio_ffmpeg import get_ffmpeg_exe

    # Mono at 8 kHz is plenty for a picture of loudness and keeps a long song to a few megabytes.
    proc = subprocess.run(
        [get_ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-nostdin", "-i", str(path),
         "-ac", "1", "-ar", "8000", "-f", "s16le", "-c:a", "pcm_s16le", "pipe:1"],
        capture_output=True,
        timeout=FFMPEG_TIMEOUT_S,
        check=False,
    )  # fmt: skip
    if proc.returncode != 0 or not proc.stdout:
        raise ThumbnailError(
            f"ffmpeg could not decode the audio: {proc.stderr.decode(errors='replace')[-500:]}"
        )
    samples = _samples(proc.stdout[: len(proc.stdout) // 2 * 2], "h")
    per_bar = max(1, len(samples) // bars)
    return [_peak(samples[i * per_bar : (i + 1) * per_bar], 32768.0, 1) for i in range(bars)]


def _samples(raw: bytes, code: str) -> array:
    samples = array(code)
    samples.frombytes(raw[: len(raw) // samples.itemsize * samples.itemsize])
    if sys.byteorder == "big":  # WAV and s16le are little-endian
        samples.byteswap()
    return samples


def _peak(samples: array, full: float, channels: int) -> float:
    if not samples:
        return 0.0
    # A few thousand samples per bar show its loudness; striding keeps a long song cheap in pure Python.
    # A stride that is a multiple of the channel count would only ever look at the first channel.
    stride = max(1, len(samples) // 4000)
    if channels > 1 and stride % channels == 0:
        stride += 1
    picked = samples[::stride]
    return min(1.0, max(max(picked), -min(picked)) / full)


def waveform(peaks: list[float]) -> Image.Image:
    """Bars mirrored around the middle line in the accent colour; quiet audio is scaled up to be seen."""
    w, h = THUMB_SIZE
    loudest = max(peaks, default=0.0)
    gain = 1.0 / loudest if loudest > 0.02 else 1.0  # silence stays flat rather than amplified noise
    im = Image.new("RGB", THUMB_SIZE, BACKGROUND)
    draw = ImageDraw.Draw(im)
    margin_x, margin_y = 24, 30
    slot = (w - 2 * margin_x) / max(len(peaks), 1)
    bar = max(2, int(slot * 0.6))
    middle, reach = h / 2, h / 2 - margin_y
    for i, peak in enumerate(peaks):
        half = max(2.0, reach * min(1.0, peak * gain))
        x = margin_x + i * slot + (slot - bar) / 2
        draw.rounded_rectangle((x, middle - half, x + bar, middle + half), radius=bar // 2, fill=BAR_COLOUR)
    return im


# -- backfill --------------------------------------------------------------------------------------------------
#: The sweep's window: a job this long done without a thumbnail lost its task (the broker dropped it at the job's
#: end, or the worker died); past a day, ``manage.py make_thumbnails`` is the way.
SWEEP_AFTER = dt.timedelta(minutes=2)
SWEEP_WITHIN = dt.timedelta(days=1)
SWEEP_BATCH = 50


def missing_recent(*, now: dt.datetime) -> list[int]:
    """Ids of jobs done between a day and ``SWEEP_AFTER`` ago that have a result to show and no thumbnail:
    those whose ``make_thumbnail`` task was lost. Oldest first, at most ``SWEEP_BATCH`` a run."""
    with_source = Artifact.objects.filter(job=OuterRef("pk"), kind__in=SOURCE_KINDS)
    with_thumb = Artifact.objects.filter(job=OuterRef("pk"), kind=Artifact.Kind.THUMB)
    return list(
        Job.objects.filter(
            state=JobState.DONE, finished_at__gte=now - SWEEP_WITHIN, finished_at__lt=now - SWEEP_AFTER
        )
        .filter(Exists(with_source))
        .exclude(Exists(with_thumb))
        .order_by("finished_at")
        .values_list("pk", flat=True)[:SWEEP_BATCH]
    )


def backfill(*, jobs, redo: bool = False) -> dict[str, int]:
    """Thumbnails for finished jobs that have none (``manage.py make_thumbnails``); ``redo`` remakes all."""
    counts = {"made": 0, "had": 0, "none": 0, "failed": 0}
    for job in jobs:
        if not redo and Artifact.objects.filter(job=job, kind=Artifact.Kind.THUMB).exists():
            counts["had"] += 1
            continue
        source = thumbnail_source(job)
        if source is None:
            counts["none"] += 1
            continue
        try:
            make_thumbnail(job, source)
        except Exception:
            logger.warning("job %s: no thumbnail from %s", job.pk, source.name, exc_info=True)
            counts["failed"] += 1
        else:
            counts["made"] += 1
    return counts
