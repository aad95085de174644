"""Real but cheap media for the device emulators.

Every function returns a playable/loadable file or byte string so the hub, the browser and ffprobe-like
checks see genuine media, not placeholders. Videos are rendered by the ffmpeg that ships inside the
imageio-ffmpeg wheel (libx264 + aac + libmp3lame + lavfi + drawtext); everything else is stdlib or Pillow.

Videos and their WAV sidecars are cached on disk because the emulators ask for the same clip over and over
(same prompt, same canvas) and a 7 s 1344x768 encode costs a couple of seconds.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import math
import os
import pathlib
import random
import struct
import subprocess
import tempfile
import textwrap
import uuid
import wave
from array import array
from collections.abc import Callable

import imageio_ffmpeg
from PIL import Image, ImageDraw, ImageFont

__all__ = ["glb_bytes", "mp3_bytes", "png_bytes", "video_audio_wav", "video_mp4", "wav_bytes"]

# Bump when the rendering recipe changes so stale cache entries are not served.
_CACHE_VERSION = "1"

# A seed-indexed palette of pleasant, clearly distinct colours (RGB).
_PALETTE: tuple[tuple[int, int, int], ...] = (
    (0x33, 0x66, 0x99),
    (0x99, 0x33, 0x66),
    (0x2E, 0x8B, 0x57),
    (0xCC, 0x77, 0x22),
    (0x55, 0x44, 0xAA),
    (0x11, 0x88, 0x99),
    (0xAA, 0x33, 0x33),
    (0x66, 0x77, 0x22),
)

# Note frequencies (Hz) of a C major pentatonic scale over two octaves; every melody is drawn from it so
# seed-chosen tunes never sound dissonant.
_SCALE_HZ: tuple[float, ...] = (
    261.63,
    293.66,
    329.63,
    392.00,
    440.00,
    523.25,
    587.33,
    659.25,
    783.99,
    880.00,
)


# --------------------------------------------------------------------------------------------------------
# Cache plumbing
# --------------------------------------------------------------------------------------------------------


def _cache_dir() -> pathlib.Path:
    root = os.environ.get("EMULATOR_MEDIA_CACHE") or os.path.join(
        tempfile.gettempdir(), "tiiny-emulator-media"
    )
    path = pathlib.Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _cache_key(kind: str, **params: object) -> str:
    blob = json.dumps({"v": _CACHE_VERSION, "kind": kind, **params}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _tmp_sibling(path: pathlib.Path) -> pathlib.Path:
    # Same directory as the target so os.replace is an atomic rename, unique per process and call so two
    # processes producing the same file never write into each other's temp file. The real suffix is kept
    # because ffmpeg picks the muxer from it.
    return path.with_name(f".{path.stem}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp{path.suffix}")


def _cached_file(path: pathlib.Path, produce: Callable[[pathlib.Path], None]) -> pathlib.Path:
    """Return `path`, producing it first via `produce(tmp_path)` when absent; atomic and race-safe."""
    if path.exists():
        return path
    tmp = _tmp_sibling(path)
    try:
        produce(tmp)
        os.replace(tmp, path)  # the last of two racing writers wins; both files are equivalent
    finally:
        tmp.unlink(missing_ok=True)
    return path


# --------------------------------------------------------------------------------------------------------
# ffmpeg helpers
# --------------------------------------------------------------------------------------------------------


def _ffmpeg() -> str:
    return imageio_ffmpeg.get_ffmpeg_exe()


@functools.cache
def _ffmpeg_listing(what: str) -> str:
    out = subprocess.run([_ffmpeg(), "-hide_banner", what], capture_output=True, text=True, check=False)
    return out.stdout


def _has_filter(name: str) -> bool:
    return any(line.split()[1:2] == [name] for line in _ffmpeg_listing("-filters").splitlines())


def _has_encoder(name: str) -> bool:
    return any(line.split()[1:2] == [name] for line in _ffmpeg_listing("-encoders").splitlines())


def _run_ffmpeg(args: list[str], *, stdin: bytes | None = None) -> bytes:
    proc = subprocess.run(
        [
            _ffmpeg(),
            "-hide_banner",
            "-loglevel",
            "error",
            *(["-nostdin"] if stdin is None else []),
            "-y",
            *args,
        ],
        input=stdin,
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"ffmpeg failed (rc={proc.returncode}): {proc.stderr.decode(errors='replace')[-2000:]}"
        )
    return proc.stdout


@functools.cache
def _font_file() -> pathlib.Path:
    """A TTF that drawtext can use on any machine: Pillow's embedded Aileron, written once to the cache.

    Using Pillow's own font (rather than a system font via fontconfig) means a bare container with no fonts
    installed renders exactly the same frames as a workstation.
    """
    font = ImageFont.load_default(size=16)
    data = getattr(font, "font_bytes", None)
    if not isinstance(font, ImageFont.FreeTypeFont) or not data:
        raise RuntimeError("Pillow has no FreeType support; cannot render text")
    path = _cache_dir() / f"aileron-{hashlib.sha256(data).hexdigest()[:12]}.ttf"
    return _cached_file(path, lambda tmp: tmp.write_bytes(data))


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


# --------------------------------------------------------------------------------------------------------
# Pillow helpers shared by png_bytes and the video title card
# --------------------------------------------------------------------------------------------------------


def _seed_colours(seed: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    rng = random.Random(seed)
    first, second = rng.sample(range(len(_PALETTE)), 2)
    return _PALETTE[first], _PALETTE[second]


def _wrap_for_width(text: str, font: ImageFont.FreeTypeFont | ImageFont.ImageFont, max_px: int) -> list[str]:
    # Estimate characters-per-line from the average glyph width, then let textwrap do the word breaking.
    avg = max(1.0, font.getlength("abcdefghijklmnopqrstuvwxyz ") / 27)
    width = max(8, int(max_px / avg))
    lines = textwrap.wrap(text.strip() or "(empty prompt)", width=width)
    return lines[:6] + (["…"] if len(lines) > 6 else [])


def _text_card(prompt: str, width: int, height: int) -> Image.Image:
    """A transparent RGBA layer the size of the frame with the wrapped prompt in a translucent box."""
    size = max(12, height // 18)
    font = _font(size)
    lines = _wrap_for_width(prompt, font, int(width * 0.8))
    card = Image.new("RGBA", (width, height), (0, 0, 0, 0))
    draw = ImageDraw.Draw(card)
    line_h = int(size * 1.3)
    block_w = max(int(font.getlength(line)) for line in lines)
    block_h = line_h * len(lines)
    x0, y0 = (width - block_w) // 2, max(4, (height - block_h) // 3)
    pad = size // 2
    draw.rounded_rectangle(
        (x0 - pad, y0 - pad, x0 + block_w + pad, y0 + block_h + pad), radius=pad, fill=(0, 0, 0, 110)
    )
    for i, line in enumerate(lines):
        lx = (width - int(font.getlength(line))) // 2
        draw.text((lx, y0 + i * line_h), line, font=font, fill=(255, 255, 255, 255))
    return card


def _gradient(width: int, height: int, seed: int) -> Image.Image:
    # A 2x2 image scaled up bilinearly is a smooth four-corner gradient for almost no CPU.
    a, b = _seed_colours(seed)
    mid = tuple((x + y) // 2 for x, y in zip(a, b, strict=True))
    dark = tuple(x // 3 for x in b)
    tiny = Image.new("RGB", (2, 2))
    tiny.putdata([a, mid, mid, dark])  # type: ignore[list-item]
    return tiny.resize((width, height), Image.Resampling.BILINEAR)


# --------------------------------------------------------------------------------------------------------
# Audio synthesis (stdlib only)
# --------------------------------------------------------------------------------------------------------


def _melody_samples(seconds: float, rate: int, seed: int) -> array:
    """Mono int16 samples: a seed-chosen pentatonic melody with soft note envelopes."""
    rng = random.Random(seed)
    notes = [rng.choice(_SCALE_HZ) for _ in range(rng.randint(4, 7))]
    note_len = 0.4
    total = int(seconds * rate)
    per_note = max(1, int(note_len * rate))
    out = array("h", bytes(2 * total))
    attack = max(1, int(0.02 * rate))
    two_pi = 2 * math.pi
    for start in range(0, total, per_note):
        freq = notes[(start // per_note) % len(notes)]
        n = min(per_note, total - start)
        w = two_pi * freq / rate
        for i in range(n):
            # Linear attack then exponential decay: plucked, clearly "music", no clicks between notes.
            env = (i / attack if i < attack else math.exp(-3.0 * (i - attack) / per_note)) * 0.35
            s = math.sin(w * i) + 0.3 * math.sin(2 * w * i)
            out[start + i] = int(9000 * env * s * 2.4)
    return out


def _speech_samples(seconds: float, rate: int, seed: int) -> array:
    """Mono int16 samples: a buzzy voiced tone, amplitude-gated into syllables with a drifting pitch."""
    rng = random.Random(seed)
    base = rng.uniform(110, 210)
    syllable = rng.uniform(0.16, 0.26)
    total = int(seconds * rate)
    out = array("h", bytes(2 * total))
    phase = 0.0
    two_pi = 2 * math.pi
    for i in range(total):
        t = i / rate
        pitch = base * (1 + 0.12 * math.sin(two_pi * 0.7 * t))
        phase += two_pi * pitch / rate
        # Syllable envelope: a raised sine at ~4-6 Hz, with every fourth syllable silent like a word break.
        k = int(t / syllable)
        gate = 0.0 if k % 4 == 3 else math.sin(math.pi * ((t / syllable) % 1.0)) ** 2
        voiced = math.sin(phase) + 0.5 * math.sin(2 * phase) + 0.25 * math.sin(3 * phase)
        out[i] = int(7000 * gate * voiced)
    return out


def _interleave(mono: array, channels: int) -> array:
    if channels == 1:
        return mono
    out = array("h", bytes(2 * len(mono) * channels))
    for c in range(channels):
        out[c::channels] = mono
    return out


def _wav_from_samples(samples: array, rate: int, channels: int) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        # WAV is little-endian; array uses native order, so swap on big-endian hosts.
        if array("h", [1]).tobytes()[0] == 0:
            samples = array("h", samples)
            samples.byteswap()
        wav.writeframes(samples.tobytes())
    return buf.getvalue()


# --------------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------------


def wav_bytes(
    *, seconds: float, sample_rate: int = 48000, channels: int = 1, seed: int = 0, kind: str = "music"
) -> bytes:
    """16-bit PCM WAV: `kind="music"` a few notes of a seed-chosen melody, `"speech"` a syllable-like tone."""
    if kind not in ("music", "speech"):
        raise ValueError(f"kind must be 'music' or 'speech', not {kind!r}")
    if seconds < 0 or sample_rate <= 0 or channels not in (1, 2):
        raise ValueError("seconds must be >= 0, sample_rate > 0 and channels 1 or 2")
    synth = _melody_samples if kind == "music" else _speech_samples
    return _wav_from_samples(_interleave(synth(seconds, sample_rate, seed), channels), sample_rate, channels)


def video_audio_wav(
    *, seconds: float, sample_rate: int = 32000, channels: int = 2, seed: int = 0
) -> pathlib.Path:
    """The WAV sidecar TensorSharp's MiniMax-H3 writes next to its MP4 (32 kHz stereo); cached on disk."""
    key = _cache_key("wav", seconds=round(seconds, 3), rate=sample_rate, channels=channels, seed=seed)
    path = _cache_dir() / f"audio-{key}.wav"
    data = functools.partial(
        wav_bytes, seconds=seconds, sample_rate=sample_rate, channels=channels, seed=seed
    )
    return _cached_file(path, lambda tmp: tmp.write_bytes(data()))


def mp3_bytes(*, seconds: float, sample_rate: int = 44100, channels: int = 2, seed: int = 0) -> bytes:
    """An MP3 of the seed's melody, encoded by the bundled ffmpeg's libmp3lame."""
    if not _has_encoder("libmp3lame"):
        raise RuntimeError("the bundled ffmpeg has no libmp3lame encoder, so MP3 cannot be produced")
    wav = wav_bytes(seconds=seconds, sample_rate=sample_rate, channels=channels, seed=seed)
    return _run_ffmpeg(
        ["-f", "wav", "-i", "pipe:0", "-c:a", "libmp3lame", "-b:a", "128k", "-f", "mp3", "pipe:1"], stdin=wav
    )


def png_bytes(*, prompt: str, width: int, height: int, seed: int = 0) -> bytes:
    """A PNG of a seed-coloured gradient with the prompt written on it."""
    if width <= 0 or height <= 0:
        raise ValueError("width and height must be positive")
    image = _gradient(width, height, seed).convert("RGBA")
    image.alpha_composite(_text_card(prompt, width, height))
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="PNG", compress_level=1)  # speed over size: it is throwaway media
    return buf.getvalue()


def video_mp4(
    *,
    prompt: str,
    seconds: float,
    width: int,
    height: int,
    fps: int = 24,
    audio: bool = True,
    audio_rate: int = 32000,
    audio_channels: int = 2,
    seed: int = 0,
) -> pathlib.Path:
    """An H.264 High yuv420p +faststart MP4 (AAC audio when `audio`), cached on disk and shared read-only.

    Frames show the wrapped prompt and a running mm:ss.f clock over a drifting seed-coloured gradient.
    Callers must not modify or delete the returned file: copy or hard-link it instead.
    """
    if width <= 0 or height <= 0 or width % 2 or height % 2:
        # yuv420p subsamples chroma 2x2, so libx264 refuses odd sizes; failing loudly beats a silent resize.
        raise ValueError(f"width and height must be positive and even, got {width}x{height}")
    if seconds <= 0 or fps <= 0:
        raise ValueError("seconds and fps must be positive")
    key = _cache_key(
        "mp4",
        prompt=prompt,
        seconds=round(seconds, 3),
        w=width,
        h=height,
        fps=fps,
        audio=audio,
        rate=audio_rate,
        channels=audio_channels,
        seed=seed,
    )
    path = _cache_dir() / f"video-{key}.mp4"
    if path.exists():
        return path
    wav = (
        video_audio_wav(seconds=seconds, sample_rate=audio_rate, channels=audio_channels, seed=seed)
        if audio
        else None
    )
    card = _cache_dir() / f"card-{key}.png"
    _cached_file(
        card, lambda tmp: _text_card(prompt, width, height).save(tmp, format="PNG", compress_level=1)
    )
    if _has_filter("drawtext"):
        produce = functools.partial(_encode_with_filters, card, wav, seconds, width, height, fps, seed)
    else:
        produce = functools.partial(_encode_with_pillow, prompt, wav, seconds, width, height, fps, seed)
    return _cached_file(path, produce)


_X264_OUT = [
    "-c:v",
    "libx264",
    "-preset",
    "veryfast",
    "-profile:v",
    "high",
    "-pix_fmt",
    "yuv420p",
    "-crf",
    "28",
]


def _frame_count(seconds: float, fps: int) -> int:
    # Callers think in frames (TensorSharp's 22 frames @ 24 fps = 0.9167 s); pin the count so rounding in
    # the duration never adds or drops a frame.
    return max(1, round(seconds * fps))


def _audio_args(wav: pathlib.Path | None) -> tuple[list[str], list[str]]:
    if wav is None:
        return [], ["-an"]
    return ["-i", str(wav)], ["-c:a", "aac", "-b:a", "96k"]


def _clock_expr() -> str:
    # mm:ss.f from the frame timestamp; ':' and ',' are escaped once for drawtext's option parser and once
    # more for the filtergraph parser.
    return r"%{eif\:trunc(t/60)\:d\:2}\:%{eif\:trunc(mod(t\,60))\:d\:2}.%{eif\:trunc(mod(t*10\,10))\:d}"


def _encode_with_filters(
    card: pathlib.Path,
    wav: pathlib.Path | None,
    seconds: float,
    width: int,
    height: int,
    fps: int,
    seed: int,
    out: pathlib.Path,
) -> None:
    """Fast path: lavfi gradient + overlaid prompt card + drawtext clock, all inside one ffmpeg run."""
    a, b = _seed_colours(seed)
    c0, c1 = (f"0x{r:02x}{g:02x}{bl:02x}" for r, g, bl in (a, b))
    font_size = max(14, height // 14)
    background = f"gradients=s={width}x{height}:r={fps}:d={seconds}:c0={c0}:c1={c1}:speed=0.015:seed={seed}"
    clock = (
        f"drawtext=fontfile='{_font_file()}':fontsize={font_size}:fontcolor=white:box=1:boxcolor=black@0.55"
        f":boxborderw={font_size // 4}:x=w-tw-{font_size}:y=h-th-{font_size}:text='{_clock_expr()}'"
    )
    audio_in, audio_out = _audio_args(wav)
    _run_ffmpeg(
        [
            "-f",
            "lavfi",
            "-i",
            background,
            "-i",
            str(card),
            *audio_in,
            "-filter_complex",
            f"[0:v][1:v]overlay=0:0:eof_action=repeat,{clock},format=yuv420p[v]",
            "-map",
            "[v]",
            *(["-map", "2:a"] if wav else []),
            *_X264_OUT,
            *audio_out,
            "-r",
            str(fps),
            "-frames:v",
            str(_frame_count(seconds, fps)),
            "-t",
            f"{seconds:.3f}",
            "-movflags",
            "+faststart",
            "-f",
            "mp4",
            str(out),
        ]
    )


def _encode_with_pillow(
    prompt: str,
    wav: pathlib.Path | None,
    seconds: float,
    width: int,
    height: int,
    fps: int,
    seed: int,
    out: pathlib.Path,
) -> None:
    """Fallback when the ffmpeg build lacks drawtext: Pillow draws each frame, ffmpeg only encodes.

    Slower (Python touches every frame) but has no dependency on ffmpeg's text stack.
    """
    base = _gradient(width * 2, height, seed)  # a wide strip we slide a window over for motion
    card = _text_card(prompt, width, height)
    font = _font(max(14, height // 14))
    frames = _frame_count(seconds, fps)
    raw = bytearray()
    for n in range(frames):
        t = n / fps
        shift = int((t * 40) % width)
        frame = base.crop((shift, 0, shift + width, height)).convert("RGBA")
        frame.alpha_composite(card)
        text = f"{int(t // 60):02d}:{int(t % 60):02d}.{int(t * 10) % 10}"
        ImageDraw.Draw(frame).text(
            (width - font.getlength(text) - 20, height - font.size * 1.6),
            text,
            font=font,
            fill=(255, 255, 255, 255),
        )
        raw += frame.convert("RGB").tobytes()
    audio_in, audio_out = _audio_args(wav)
    _run_ffmpeg(
        [
            "-f",
            "rawvideo",
            "-pix_fmt",
            "rgb24",
            "-s",
            f"{width}x{height}",
            "-r",
            str(fps),
            "-i",
            "pipe:0",
            *audio_in,
            "-map",
            "0:v",
            *(["-map", "1:a"] if wav else []),
            *_X264_OUT,
            *audio_out,
            "-t",
            f"{seconds:.3f}",
            "-movflags",
            "+faststart",
            "-f",
            "mp4",
            str(out),
        ],
        stdin=bytes(raw),
    )


# --------------------------------------------------------------------------------------------------------
# glTF 2.0 binary (GLB)
# --------------------------------------------------------------------------------------------------------

_FLOAT, _UINT16 = 5126, 5123
_ARRAY_BUFFER, _ELEMENT_ARRAY_BUFFER = 34962, 34963


def _icosphere(subdivisions: int = 1) -> tuple[list[tuple[float, float, float]], list[tuple[int, int, int]]]:
    t = (1 + 5**0.5) / 2
    verts = [
        (-1, t, 0),
        (1, t, 0),
        (-1, -t, 0),
        (1, -t, 0),
        (0, -1, t),
        (0, 1, t),
        (0, -1, -t),
        (0, 1, -t),
        (t, 0, -1),
        (t, 0, 1),
        (-t, 0, -1),
        (-t, 0, 1),
    ]
    pts = [_unit(v) for v in verts]
    faces = [
        (0, 11, 5),
        (0, 5, 1),
        (0, 1, 7),
        (0, 7, 10),
        (0, 10, 11),
        (1, 5, 9),
        (5, 11, 4),
        (11, 10, 2),
        (10, 7, 6),
        (7, 1, 8),
        (3, 9, 4),
        (3, 4, 2),
        (3, 2, 6),
        (3, 6, 8),
        (3, 8, 9),
        (4, 9, 5),
        (2, 4, 11),
        (6, 2, 10),
        (8, 6, 7),
        (9, 8, 1),
    ]
    for _ in range(subdivisions):
        # Midpoints are shared between neighbouring faces, so memoise them per subdivision pass.
        cache: dict[tuple[int, int], int] = {}
        split = []
        for a, b, c in faces:
            ab, bc, ca = (_midpoint(pts, cache, i, j) for i, j in ((a, b), (b, c), (c, a)))
            split += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        faces = split
    return pts, faces


def _midpoint(
    pts: list[tuple[float, float, float]], cache: dict[tuple[int, int], int], i: int, j: int
) -> int:
    key = (min(i, j), max(i, j))
    if key not in cache:
        pts.append(_unit(tuple((a + b) / 2 for a, b in zip(pts[i], pts[j], strict=True))))
        cache[key] = len(pts) - 1
    return cache[key]


def _unit(v: tuple[float, ...]) -> tuple[float, float, float]:
    n = math.sqrt(sum(x * x for x in v))
    return (v[0] / n, v[1] / n, v[2] / n)


def _flat_mesh(seed: int) -> dict[str, list[tuple[float, ...]] | list[int]]:
    """Un-indexed-per-face vertices so each triangle gets its own normal: the faceted low-poly look."""
    pts, faces = _icosphere(1)
    rng = random.Random(seed)
    a, b = _seed_colours(seed)
    positions: list[tuple[float, ...]] = []
    normals: list[tuple[float, ...]] = []
    colours: list[tuple[float, ...]] = []
    uvs: list[tuple[float, ...]] = []
    for face in faces:
        tri = [pts[i] for i in face]
        e1 = [tri[1][k] - tri[0][k] for k in range(3)]
        e2 = [tri[2][k] - tri[0][k] for k in range(3)]
        normal = _unit(
            (e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2], e1[0] * e2[1] - e1[1] * e2[0])
        )
        mix = rng.random()
        colour = tuple((ca * (1 - mix) + cb * mix) / 255 for ca, cb in zip(a, b, strict=True))
        us = [0.5 + math.atan2(p[2], p[0]) / (2 * math.pi) for p in tri]
        if max(us) - min(us) > 0.5:  # face straddles the texture seam: unwrap so it doesn't smear the texture
            us = [u + 1 if u < 0.5 else u for u in us]
        for p, u in zip(tri, us, strict=True):
            positions.append(p)
            normals.append(normal)
            colours.append(colour)
            uvs.append((u, 0.5 - math.asin(max(-1.0, min(1.0, p[1]))) / math.pi))
    return {
        "positions": positions,
        "normals": normals,
        "colours": colours,
        "uvs": uvs,
        "indices": list(range(len(positions))),
    }


def _texture_png(seed: int) -> bytes:
    a, b = _seed_colours(seed)
    image = Image.new("RGB", (64, 64), a)
    draw = ImageDraw.Draw(image)
    for y in range(0, 64, 16):  # a checkerboard so the texture mapping is visible in a viewer
        for x in range(0, 64, 16):
            if (x + y) // 16 % 2:
                draw.rectangle((x, y, x + 15, y + 15), fill=b)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def glb_bytes(*, textured: bool = False, seed: int = 0) -> bytes:
    """A glTF 2.0 binary: a faceted icosphere with normals and vertex colours (+ a PNG baseColor texture)."""
    mesh = _flat_mesh(seed)
    bin_chunk = bytearray()
    buffer_views: list[dict[str, int]] = []

    def add_view(data: bytes, *, target: int | None = None, stride: int | None = None) -> int:
        # Every view starts on a 4-byte boundary, which glTF requires for float/uint accessors.
        bin_chunk.extend(b"\0" * (-len(bin_chunk) % 4))
        view = {"buffer": 0, "byteOffset": len(bin_chunk), "byteLength": len(data)}
        if target is not None:
            view["target"] = target
        if stride is not None:
            view["byteStride"] = stride
        bin_chunk.extend(data)
        buffer_views.append(view)
        return len(buffer_views) - 1

    accessors: list[dict[str, object]] = []

    def add_floats(rows: list[tuple[float, ...]], kind: str, *, bounds: bool = False) -> int:
        width = len(rows[0])
        view = add_view(
            struct.pack(f"<{len(rows) * width}f", *(x for r in rows for x in r)),
            target=_ARRAY_BUFFER,
            stride=4 * width,
        )
        acc: dict[str, object] = {
            "bufferView": view,
            "componentType": _FLOAT,
            "count": len(rows),
            "type": kind,
        }
        if bounds:  # required for POSITION; viewers use it for framing
            acc["min"] = [min(r[k] for r in rows) for k in range(width)]
            acc["max"] = [max(r[k] for r in rows) for k in range(width)]
        accessors.append(acc)
        return len(accessors) - 1

    attributes = {
        "POSITION": add_floats(mesh["positions"], "VEC3", bounds=True),  # type: ignore[arg-type]
        "NORMAL": add_floats(mesh["normals"], "VEC3"),  # type: ignore[arg-type]
        "COLOR_0": add_floats(mesh["colours"], "VEC3"),  # type: ignore[arg-type]
    }
    indices: list[int] = mesh["indices"]  # type: ignore[assignment]
    index_view = add_view(struct.pack(f"<{len(indices)}H", *indices), target=_ELEMENT_ARRAY_BUFFER)
    accessors.append(
        {
            "bufferView": index_view,
            "componentType": _UINT16,
            "count": len(indices),
            "type": "SCALAR",
            "min": [0],
            "max": [len(indices) - 1],
        }
    )
    index_accessor = len(accessors) - 1

    material: dict[str, object] = {
        "name": "emulator",
        "pbrMetallicRoughness": {"metallicFactor": 0.0, "roughnessFactor": 0.8},
    }
    gltf: dict[str, object] = {"asset": {"version": "2.0", "generator": "tiiny-hub emulator"}}
    if textured:
        attributes["TEXCOORD_0"] = add_floats(mesh["uvs"], "VEC2")  # type: ignore[arg-type]
        image_view = add_view(_texture_png(seed))
        gltf["images"] = [{"bufferView": image_view, "mimeType": "image/png"}]
        gltf["samplers"] = [{"magFilter": 9729, "minFilter": 9987, "wrapS": 10497, "wrapT": 10497}]
        gltf["textures"] = [{"sampler": 0, "source": 0}]
        material["pbrMetallicRoughness"]["baseColorTexture"] = {"index": 0}  # type: ignore[index]

    bin_chunk.extend(b"\0" * (-len(bin_chunk) % 4))
    gltf.update(
        {
            "scene": 0,
            "scenes": [{"nodes": [0]}],
            "nodes": [{"mesh": 0, "name": "shape"}],
            "meshes": [
                {
                    "name": "shape",
                    "primitives": [
                        {"attributes": attributes, "indices": index_accessor, "material": 0, "mode": 4}
                    ],
                }
            ],
            "materials": [material],
            "accessors": accessors,
            "bufferViews": buffer_views,
            "buffers": [{"byteLength": len(bin_chunk)}],
        }
    )
    json_chunk = json.dumps(gltf, separators=(",", ":")).encode()
    json_chunk += b" " * (-len(json_chunk) % 4)  # the spec pads JSON with spaces, BIN with zeros
    total = 12 + 8 + len(json_chunk) + 8 + len(bin_chunk)
    return b"".join(
        [
            struct.pack("<4sII", b"glTF", 2, total),
            struct.pack("<I4s", len(json_chunk), b"JSON"),
            json_chunk,
            struct.pack("<I4s", len(bin_chunk), b"BIN\0"),
            bytes(bin_chunk),
        ]
    )
