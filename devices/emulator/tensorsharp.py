"""Emulator of TensorSharp.Server.Host (zhongkaifu/TensorSharp) hosting one video or image-edit model.

Faithful to /work/shared/reference/tensorsharp-server-api.md and the field notes §11: no auth, `/api/*`
errors as `{"error": "..."}`, `/v1/*` errors as `{"error": {"message", "type"}}`, null members emitted,
SSE frames `data: <json>\\n\\n` with no `[DONE]` sentinel, one process-wide lock serialising renders (a second
caller waits), and a render that dies with its client connection.

Time is scaled: a render that would take T seconds on the device takes T / speed seconds here. Every time
the emulator *reports* (elapsedSeconds, etaSeconds) is device time, so a hub sees realistic numbers.
Output is real media from `devices.emulator.media` (MP4 without audio + a 32 kHz stereo WAV sidecar for H3).

Assumptions where the reference is silent are marked "ASSUMPTION" below.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import io
import json
import math
import os
import pathlib
import random
import re
import shutil
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
from PIL import Image, ImageDraw, ImageFilter
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from devices.emulator import media

__all__ = ["MODELS", "ModelSpec", "create_app", "estimate_render_seconds"]

NOT_VIDEO_MODEL = "The loaded model is not a video-generation model."
NOT_EDIT_MODEL = "The loaded model is not a Qwen-Image-Edit model."
PROMPT_REQUIRED = "prompt is required."
SERVER_FAILED = "The server failed to handle the request."
MAX_BODY_BYTES = 500 * 1024 * 1024  # the Host's request body cap
H3_AUDIO_RATE, H3_AUDIO_CHANNELS = 32000, 2

Json = dict[str, Any]
Emit = Callable[[Json], Awaitable[None]]


# --------------------------------------------------------------------------------------------------------
# Hosted models
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    key: str
    file: str
    architecture: str
    video: Json | None  # the /api/models `video` block; None for non-video models
    edits: bool = False
    width: int = 0  # startup defaults (--video-width/--video-height/--video-frames/--video-steps/--fps)
    height: int = 0
    frames: int = 0
    fps: int = 24
    steps: int = 0
    frame_grid: tuple[int, int] = (1, 0)  # frames snap to k * grid[0] + grid[1]
    size_multiple: int = 16
    modes: frozenset[str] = frozenset()


MODELS: dict[str, ModelSpec] = {
    "minimax-h3": ModelSpec(
        key="minimax-h3",
        file="minimax_h3_fl2va_pruned-Q4_K.gguf",
        architecture="minimax-h3",
        video={
            "family": "minimax-h3",
            "supportsAudio": True,
            "supportsImageConditioning": True,
            "supportsEndImageConditioning": True,
            "supportsReferenceConditioning": False,
            "maxReferenceImages": 0,
        },
        # The API_EXAMPLES launch line: --video-width 640 --video-height 384 --video-steps 20 --video-frames 22
        width=640,
        height=384,
        frames=22,
        steps=20,
        frame_grid=(17, 5),
        size_multiple=32,
        modes=frozenset({"t2v", "i2v", "fl2v"}),  # the FL2VA checkpoint; "ref" needs Ref2VA
    ),
    "wan": ModelSpec(
        key="wan",
        file="Wan2.2-TI2V-5B-Q8_0.gguf",
        architecture="wan",
        video={
            "family": "wan",
            "supportsAudio": False,
            "supportsImageConditioning": True,
            "supportsEndImageConditioning": False,
            "supportsReferenceConditioning": False,
            "maxReferenceImages": 0,
        },
        # TI2V-5B recipe: 49 frames @ 24 fps, 50 steps; 832x480 as in the docs' example. ASSUMPTION: sizes
        # round up to a multiple of 16 (the VAE stride x patch size).
        width=832,
        height=480,
        frames=49,
        steps=50,
        frame_grid=(4, 1),
        size_multiple=16,
        modes=frozenset({"t2v", "i2v"}),
    ),
    "qwen-image-edit": ModelSpec(
        key="qwen-image-edit",
        file="Qwen-Image-Edit-2509-Q4_K_M.gguf",
        architecture="qwen_image",
        video=None,
        edits=True,
        steps=30,  # steps=0 means auto: 30 steps / cfg 2.5
    ),
}


# --------------------------------------------------------------------------------------------------------
# Render-time model (device seconds)
# --------------------------------------------------------------------------------------------------------


def estimate_render_seconds(
    architecture: str,
    *,
    width: int,
    height: int,
    frames: int,
    steps: int,
    conditioning_images: int = 0,
    audio: bool = False,
) -> dict[str, float]:
    """Device seconds per phase of one render; the emulator sleeps sum(...) / speed.

    cost(denoise)    = steps x megapixel-frames x k_denoise   (megapixel-frames = width*height*frames / 1e6)
    cost(vae-decode) = megapixel-frames x k_vae
    plus fixed text-encode, 1.5 s per conditioning image and, for H3 with audio, 1.5 s of audio decode.

    Calibrated on the reference's own numbers:
      MiniMax-H3, 640x384, 22 frames, 8 steps      -> ~63 s   (API_EXAMPLES: 63.1 s on an M5 Pro)
      Wan TI2V-5B, 832x480, 81 frames, 50 steps    -> ~270 s  (/v1/videos/generations example)
      Qwen-Image-Edit, 1184x544, 30 (auto) steps   -> ~40 s   (image-edit example: 40.4 s)
    Real denoise cost grows faster than linearly with frames (attention); linear is close enough here.
    """
    mpf = width * height * max(frames, 1) / 1e6
    k_denoise, k_vae, text = {
        "minimax-h3": (1.23, 1.2, 2.0),
        "wan": (0.153, 0.6, 3.0),
        "qwen_image": (1.88, 1.5, 3.0),
    }[architecture]
    phases = {"text-encode": text}
    if conditioning_images:
        phases["image-encode"] = 1.5 * conditioning_images
    phases["denoise"] = steps * mpf * k_denoise
    phases["vae-decode"] = mpf * k_vae
    if audio:
        phases["audio-decode"] = 1.5
    return phases


# --------------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------------


class BadInput(Exception):
    """A parser-level rejection: 400 on every surface (`invalid_request_error` on /v1)."""


class ModelRefusal(Exception):
    """The model refusing a request (ArgumentException & co.): 400 with its message on /api/*, but on
    /v1/videos/generations it is not caught and becomes the middleware's 500 internal_error."""


class BadBody(Exception):
    """Malformed JSON: the middleware's 400 "Could not read the request body: ..."."""


class _ClientGone(Exception):
    """Sending to the client failed: it went away mid-stream."""


def _api_error(message: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _v1_error(message: str, status: int = 400, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)


# --------------------------------------------------------------------------------------------------------
# Request parsing (VideoGenerationParamsParser)
# --------------------------------------------------------------------------------------------------------


@dataclass
class VideoJob:
    prompt: str
    width: int
    height: int
    frames: int
    fps: int
    steps: int
    cfg: float | None
    seed: int
    mode: str
    audio: bool
    conditioning_images: int


@dataclass
class EditJob:
    prompt: str
    images: list[bytes]
    width: int
    height: int
    steps: int
    cfg: float
    seed: int


_DOTNET_KIND = {str: "String", bool: "True", list: "Array", dict: "Object", type(None): "Null"}


def _number(body: Json, name: str, *, integer: bool) -> float | int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        # System.Text.Json's own words when GetInt32() meets the wrong token; the model layer lets it
        # surface as a refusal (InvalidOperationException).
        kind = _DOTNET_KIND.get(type(value), "Unknown")
        raise ModelRefusal(
            f"The requested operation requires an element of type 'Number', but the target element has type "
            f"'{kind}'."
        )
    if integer:
        if isinstance(value, float) and not value.is_integer():
            raise ModelRefusal(f"{name} must be a whole number.")
        return int(value)
    return float(value)


def _either(body: Json, camel: str, snake: str) -> Any:
    # camelCase wins when both spellings are present.
    return body[camel] if camel in body else body.get(snake)


def _snap(value: int, grid: tuple[int, int]) -> int:
    """Nearest k*step+offset (k >= 0). ASSUMPTION: nearest, ties upward; the docs only say "snap"."""
    step, offset = grid
    k = max(0, math.floor((value - offset) / step + 0.5))
    return k * step + offset


def _round_up(value: int, multiple: int) -> int:
    return max(multiple, -(-value // multiple) * multiple)


def _fit_area(area: int, aspect: float, multiple: int) -> tuple[int, int]:
    width = math.sqrt(area * aspect)
    return _round_up(int(width), multiple), _round_up(int(width / aspect), multiple)


class Uploads:
    """The upload directory: server-assigned names, confined lookups."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def resolve(self, name: object) -> pathlib.Path | None:
        """The file a client-supplied name refers to, or None when it is not a file inside the directory."""
        if not isinstance(name, str) or not name:
            return None
        candidate = pathlib.Path(name)
        # Absolute paths inside the upload directory are accepted for older clients.
        path = candidate if candidate.is_absolute() else self.root / candidate
        try:
            path = path.resolve()
            path.relative_to(self.root.resolve())
        except (ValueError, OSError):
            return None
        return path if path.is_file() else None

    def new_name(self, suffix: str, prefix: str = "") -> pathlib.Path:
        return self.root / f"{prefix}{uuid.uuid4().hex}{suffix}"

    def clear(self) -> None:
        for child in self.root.iterdir():
            if child.is_file():
                child.unlink(missing_ok=True)


def _decode_image_field(value: object) -> bytes:
    if not isinstance(value, str):
        raise BadInput("image must be base64-encoded (optionally a data: URL).")
    payload = value.split(",", 1)[1] if value.startswith("data:") and "," in value else value
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise BadInput("image must be base64-encoded (optionally a data: URL).") from None
    if not data:
        raise BadInput("image must be base64-encoded (optionally a data: URL).")
    return data


def _check_names(uploads: Uploads, body: Json, camel: str, snake: str, message: str) -> list[pathlib.Path]:
    value = _either(body, camel, snake)
    if value is None:
        return []
    names = value if isinstance(value, list) else None
    paths = [uploads.resolve(n) for n in names] if names is not None else [None]
    if any(p is None for p in paths):
        raise BadInput(message)
    return [p for p in paths if p is not None]


def parse_video_request(spec: ModelSpec, uploads: Uploads, body: Json) -> VideoJob:
    """Validate and normalise a video request against the hosted model (raises BadInput / ModelRefusal)."""
    if spec.video is None:
        raise BadInput(NOT_VIDEO_MODEL)
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise BadInput(PROMPT_REQUIRED)

    # Conditioning references: the shared parser checks every name, whatever the model then uses.
    first: bytes | pathlib.Path | None = None
    if body.get("imagePath") is not None:
        first = uploads.resolve(body["imagePath"])
        if first is None:
            raise BadInput("imagePath must reference a previously uploaded file.")
    elif body.get("image") is not None:
        first = _decode_image_field(body["image"])
    end_value = _either(body, "endImage", "end_image")
    end = None
    if end_value is not None:
        end = uploads.resolve(end_value)
        if end is None:
            raise BadInput("endImage must reference a previously uploaded file.")
    refs = _check_names(
        uploads, body, "referenceImages", "reference_images",
        "referenceImages entries must reference previously uploaded files.",
    )  # fmt: skip
    ref_media = [
        _check_names(
            uploads, body, camel, snake, f"{camel} entries must reference previously uploaded files."
        )
        for camel, snake in (
            ("referenceVideos", "reference_videos"),
            ("referenceAudios", "reference_audios"),
            ("referenceVideoAudios", "reference_video_audios"),
        )
    ]

    width = _number(body, "width", integer=True)
    height = _number(body, "height", integer=True)
    frames = _number(body, "frames", integer=True)
    steps = _number(body, "steps", integer=True)
    fps = _number(body, "fps", integer=True)
    seed = _number(body, "seed", integer=True)
    cfg = _number(body, "cfg", integer=False)
    for name in ("cfg2", "flowShift", "cfgCacheStride"):
        _number(body, name, integer=name == "cfgCacheStride")
    sampler = body.get("sampler")
    if sampler is not None and sampler not in ("unipc", "euler"):
        raise ModelRefusal(f"Unknown sampler '{sampler}'. Use 'unipc' or 'euler'.")  # ASSUMPTION: wording
    for name, value in (
        ("width", width),
        ("height", height),
        ("frames", frames),
        ("steps", steps),
        ("fps", fps),
    ):
        if value is not None and value <= 0:
            raise ModelRefusal(f"{name} must be positive.")

    if spec.architecture == "minimax-h3":
        return _h3_job(
            spec, body, prompt, first, end, refs, ref_media, width, height, frames, steps, cfg, seed
        )
    return _wan_job(spec, prompt, first, width, height, frames, steps, fps, cfg, seed)


def _pick_seed(seed: int | float | None) -> int:
    # seed 0 (or none) means "random"; the reply carries the seed actually used.
    return int(seed) if seed else random.randint(1, 2**31 - 1)


def _h3_job(
    spec: ModelSpec,
    body: Json,
    prompt: str,
    first: bytes | pathlib.Path | None,
    end: pathlib.Path | None,
    refs: list[pathlib.Path],
    ref_media: list[list[pathlib.Path]],
    width: Any,
    height: Any,
    frames: Any,
    steps: Any,
    cfg: Any,
    seed: Any,
) -> VideoJob:
    if cfg is not None and cfg > 1.0:
        raise ModelRefusal(
            f"MiniMax-H3 is CFG-distilled: guidance above 1.0 is not supported (cfg={cfg:g}). "
            "Leave cfg at 1.0 and raise steps for quality (20 is the default, 4-8 the fast operating point)."
        )
    has_refs = bool(refs or any(ref_media))
    mode = _either(body, "videoMode", "video_mode")
    if mode is None:
        mode = "ref" if has_refs else "fl2v" if end is not None else "i2v" if first is not None else "t2v"
    if mode not in ("t2v", "i2v", "fl2v", "ref"):
        raise ModelRefusal(f"Unknown videoMode '{mode}'. Use t2v, i2v, fl2v or ref.")
    if mode not in spec.modes:
        raise ModelRefusal(
            f"videoMode '{mode}' needs the MiniMax-H3 Ref2VA checkpoint; the loaded {spec.file} is FL2VA and "
            "takes t2v, i2v and fl2v. Load a *ref2va* GGUF for reference conditioning."
        )
    if mode == "i2v" and first is None:
        raise ModelRefusal("videoMode 'i2v' needs a first frame (imagePath or image).")
    if mode == "fl2v" and (first is None or end is None):
        raise ModelRefusal("videoMode 'fl2v' needs both a first frame (imagePath or image) and endImage.")
    images = (first is not None and mode != "t2v") + (end is not None and mode == "fl2v")
    generate_audio = _either(body, "generateAudio", "generate_audio")
    return VideoJob(
        prompt=prompt,
        width=_round_up(width or spec.width, spec.size_multiple),
        height=_round_up(height or spec.height, spec.size_multiple),
        frames=max(5, _snap(frames or spec.frames, spec.frame_grid)),
        fps=24,  # pinned, whatever the request asks for
        steps=steps or spec.steps,
        cfg=1.0 if cfg is None else cfg,
        seed=_pick_seed(seed),
        mode=mode,
        audio=generate_audio is not False and bool(spec.video and spec.video["supportsAudio"]),
        conditioning_images=int(images),
    )


def _wan_job(
    spec: ModelSpec,
    prompt: str,
    first: bytes | pathlib.Path | None,
    width: Any,
    height: Any,
    frames: Any,
    steps: Any,
    fps: Any,
    cfg: Any,
    seed: Any,
) -> VideoJob:
    # Wan ignores endImage, references, generateAudio and videoMode (video-only model).
    w, h = width or spec.width, height or spec.height
    if first is not None and not (width or height):
        # "When image is given without an explicit size, the output follows the image's aspect ratio."
        aspect = _image_aspect(first)
        if aspect:
            w, h = _fit_area(spec.width * spec.height, aspect, spec.size_multiple)
    return VideoJob(
        prompt=prompt,
        width=_round_up(w, spec.size_multiple),
        height=_round_up(h, spec.size_multiple),
        frames=_snap(frames or spec.frames, spec.frame_grid),
        fps=fps or spec.fps,
        steps=steps or spec.steps,
        cfg=cfg,
        seed=_pick_seed(seed),
        mode="i2v" if first is not None else "t2v",
        audio=False,
        conditioning_images=int(first is not None),
    )


def _image_aspect(source: bytes | pathlib.Path) -> float | None:
    try:
        with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as image:
            return image.width / image.height
    except (OSError, ValueError, ZeroDivisionError):
        return None


# --------------------------------------------------------------------------------------------------------
# Counters (the /__emulator__/ control API, same shape as the Tiiny emulator's)
# --------------------------------------------------------------------------------------------------------


@dataclass
class Counters:
    requests: Counter[str] = field(default_factory=Counter)
    renders_submitted: int = 0
    renders_completed: int = 0
    renders_cancelled: int = 0
    current_work: int = 0
    peak_concurrent_work: int = 0

    def snapshot(self) -> Json:
        return {
            "requests": dict(self.requests),
            "renders_submitted": self.renders_submitted,
            "renders_completed": self.renders_completed,
            "renders_cancelled": self.renders_cancelled,
            "current_work": self.current_work,
            "peak_concurrent_work": self.peak_concurrent_work,
        }

    def reset(self) -> None:
        self.requests.clear()
        self.renders_submitted = self.renders_completed = self.renders_cancelled = 0
        self.peak_concurrent_work = self.current_work  # in-flight work is still real


# --------------------------------------------------------------------------------------------------------
# The emulated host
# --------------------------------------------------------------------------------------------------------


def _heartbeat_wall(speed: float) -> float:
    # A heartbeat every ~2 device seconds, but never more often than 20 per wall second so fast emulation
    # does not flood the client.
    return max(0.05, 2.0 / speed)


class Host:
    def __init__(self, spec: ModelSpec, speed: float, data_dir: pathlib.Path) -> None:
        self.spec = spec
        self.initial_speed = self.speed = speed
        self.uploads = Uploads(data_dir / "uploads")
        # One process-wide lock for video and image-edit work: a second caller waits, it is not refused.
        self.lock = anyio.Lock()
        self.counters = Counters()
        self.active: set[anyio.CancelScope] = set()

    # ---- rendering -------------------------------------------------------------------------------------

    async def render_video(self, job: VideoJob, emit: Emit) -> Json:
        """Run one video render under the lock; returns the §11.5 result fields (camelCase)."""
        phases = estimate_render_seconds(
            self.spec.architecture,
            width=job.width,
            height=job.height,
            frames=job.frames,
            steps=job.steps,
            conditioning_images=job.conditioning_images,
            audio=job.audio,
        )
        stem = f"video-{uuid.uuid4().hex}"

        async def produce_files() -> None:
            await anyio.to_thread.run_sync(self._write_video_files, job, stem, abandon_on_cancel=True)

        async def run(clock: _DeviceClock) -> Json:
            files = _Background(produce_files)
            async with anyio.create_task_group() as tg:
                tg.start_soon(files.run)
                for phase, seconds in phases.items():
                    await self._video_phase(clock, emit, job, phase, seconds, sum(phases.values()))
                await files.wait(clock)
            await emit(self._tick(job.steps, job.steps, "done", "finished", clock.elapsed, 0.0))
            return {
                "url": f"/uploads/{stem}.mp4",
                "audioUrl": f"/uploads/{stem}.wav" if job.audio else None,
                "width": job.width,
                "height": job.height,
                "frames": job.frames,
                "fps": job.fps,
                "seed": job.seed,
                "codec": "h264",
                "elapsedSeconds": round(clock.elapsed, 1),
            }

        return await self._locked(run)

    async def _video_phase(
        self, clock: _DeviceClock, emit: Emit, job: VideoJob, phase: str, seconds: float, total: float
    ) -> None:
        detail = {
            "text-encode": "encoding prompt",
            "denoise": f"sampling {job.steps} steps",
            "image-encode": f"encoding {job.conditioning_images} conditioning image(s)",
            "vae-decode": f"decoding {job.frames} frames",
            "audio-decode": f"decoding {H3_AUDIO_RATE // 1000} kHz stereo audio",
        }
        step = job.steps if phase in ("vae-decode", "audio-decode") else 0
        await emit(
            self._tick(step, job.steps, phase, detail.get(phase), clock.elapsed, total - clock.elapsed)
        )
        if phase != "denoise":
            await clock.advance(
                seconds, heartbeat=self._heartbeat(emit, job, phase, detail.get(phase), total)
            )
            return
        per_step = seconds / max(job.steps, 1)
        for n in range(1, job.steps + 1):
            await clock.advance(per_step, heartbeat=self._heartbeat(emit, job, phase, None, total, n - 1))
            if self.spec.architecture == "wan":
                # ASSUMPTION: Wan's sampler reports through the plain step callback, whose ticks carry the
                # documented defaults (phase/detail null, elapsed 0, eta -1); H3 reports rich ticks.
                await emit(self._tick(n, job.steps, None, None, 0, -1))
            else:
                eta = total - clock.elapsed
                await emit(self._tick(n, job.steps, "denoise", f"step {n}/{job.steps}", clock.elapsed, eta))

    def _heartbeat(
        self, emit: Emit, job: VideoJob, phase: str, detail: str | None, total: float, step: int | None = None
    ) -> Callable[[float], Awaitable[None]]:
        async def beat(elapsed: float) -> None:
            at = step if step is not None else (job.steps if phase in ("vae-decode", "audio-decode") else 0)
            await emit(
                self._tick(at, job.steps, phase, detail or f"step {at}/{job.steps}", elapsed, total - elapsed)
            )

        return beat

    @staticmethod
    def _tick(
        step: int, total: int, phase: str | None, detail: str | None, elapsed: float, eta: float
    ) -> Json:
        return {
            "videoGen": True,
            "step": step,
            "total": total,
            "phase": phase,
            "detail": detail,
            "elapsedSeconds": round(elapsed, 1),
            "etaSeconds": round(max(eta, 0.0), 1) if eta != -1 else -1,
        }

    def _write_video_files(self, job: VideoJob, stem: str) -> None:
        # seed % 16 only picks colours, so bounding it lets the media cache serve repeat prompts.
        seconds = job.frames / job.fps
        mp4 = media.video_mp4(
            prompt=job.prompt,
            seconds=seconds,
            width=job.width,
            height=job.height,
            fps=job.fps,
            audio=False,  # H3's soundtrack is never muxed: it is the WAV sidecar
            seed=job.seed % 16,
        )
        _place(mp4, self.uploads.root / f"{stem}.mp4")
        if job.audio:
            wav = media.video_audio_wav(
                seconds=seconds, sample_rate=H3_AUDIO_RATE, channels=H3_AUDIO_CHANNELS, seed=job.seed % 16
            )
            _place(wav, self.uploads.root / f"{stem}.wav")

    async def render_edit(self, job: EditJob, emit: Emit) -> Json:
        phases = estimate_render_seconds(
            "qwen_image", width=job.width, height=job.height, frames=1, steps=job.steps
        )
        total = sum(phases.values())
        name = f"edit-{uuid.uuid4().hex}.png"
        previews = _preview_steps(job.steps)

        async def run(clock: _DeviceClock) -> Json:
            result = await anyio.to_thread.run_sync(_edit_image, job, abandon_on_cancel=True)
            await clock.advance(phases["text-encode"])
            for n in range(1, job.steps + 1):
                await clock.advance(phases["denoise"] / job.steps)
                image = None
                if n in previews:
                    image = await anyio.to_thread.run_sync(_preview_data_url, result, n / job.steps)
                frame = {"imageEdit": True, "step": n, "total": job.steps, "image": image}
                await emit({**frame, "width": job.width, "height": job.height})
            await clock.advance(total - clock.elapsed)
            await anyio.to_thread.run_sync(result.save, self.uploads.root / name, "PNG")
            return {"url": f"/uploads/{name}", "width": job.width, "height": job.height,
                    "elapsedSeconds": round(clock.elapsed, 1)}  # fmt: skip

        return await self._locked(run)

    async def _locked(self, run: Callable[[_DeviceClock], Awaitable[Json]]) -> Json:
        """Admit one render: wait for the lock, run it, and account for how it ended.

        Cancellation (client disconnect, /__emulator__/reset) arrives as anyio's cancellation exception at
        any await, waiting for the lock included; `async with` always releases the lock.
        """
        self.counters.renders_submitted += 1
        finished = False
        with anyio.CancelScope() as scope:
            self.active.add(scope)
            try:
                async with self.lock:
                    self.counters.current_work += 1
                    self.counters.peak_concurrent_work = max(
                        self.counters.peak_concurrent_work, self.counters.current_work
                    )
                    try:
                        result = await run(_DeviceClock(self))
                        finished = True
                    finally:
                        self.counters.current_work -= 1
            except _ClientGone:
                pass
            finally:
                self.active.discard(scope)
                if finished:
                    self.counters.renders_completed += 1
                else:
                    self.counters.renders_cancelled += 1
        if not finished:
            # Cancelled by /__emulator__/reset (our own scope swallowed it) or the client went away.
            raise _ClientGone()
        return result

    def cancel_all(self) -> None:
        for scope in list(self.active):
            scope.cancel()


class _DeviceClock:
    """Device time for one render: sleeps device_seconds / speed, re-reading speed as it goes."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.elapsed = 0.0

    async def advance(
        self, seconds: float, heartbeat: Callable[[float], Awaitable[None]] | None = None
    ) -> None:
        remaining = seconds
        while remaining > 1e-9:
            speed = self.host.speed
            wall = min(remaining / speed, _heartbeat_wall(speed))
            await anyio.sleep(wall)
            self.elapsed += wall * speed
            remaining -= wall * speed
            if heartbeat is not None and remaining > 1e-9:
                await heartbeat(self.elapsed)

    async def wait_wall(self, started: float) -> None:
        self.elapsed += (time.monotonic() - started) * self.host.speed


class _Background:
    """Real media is produced while the simulated phases run; the render waits for it at the end."""

    def __init__(self, fn: Callable[[], Awaitable[None]]) -> None:
        self.fn = fn
        self.done = anyio.Event()
        self.error: BaseException | None = None

    async def run(self) -> None:
        try:
            await self.fn()
        except Exception as exc:  # noqa: BLE001 - surfaced by wait(); the render fails with its message
            self.error = exc
        finally:
            self.done.set()

    async def wait(self, clock: _DeviceClock) -> None:
        started = time.monotonic()
        await self.done.wait()
        await clock.wait_wall(started)  # a slow encode shows up as device time, as it would on the device
        if self.error is not None:
            raise self.error


def _place(src: pathlib.Path, dst: pathlib.Path) -> None:
    # Hard links are instant and safe (the cache never rewrites a file in place); copy across filesystems.
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


# --------------------------------------------------------------------------------------------------------
# Image edit helpers
# --------------------------------------------------------------------------------------------------------


def _preview_steps(steps: int) -> set[int]:
    """Throttled previews: at most 8 per edit, spread evenly and always including the last step."""
    count = min(8, steps)
    return {max(1, round(steps * (i + 1) / count)) for i in range(count)}


def _edit_image(job: EditJob) -> Image.Image:
    with Image.open(io.BytesIO(job.images[0])) as source:
        base = source.convert("RGB").resize((job.width, job.height), Image.Resampling.BILINEAR)
    overlay = Image.open(io.BytesIO(media.png_bytes(prompt=job.prompt, width=job.width, height=job.height,
                                                    seed=job.seed % 16)))  # fmt: skip
    return Image.blend(base, overlay.convert("RGB"), 0.45)


def _preview_data_url(image: Image.Image, progress: float) -> str:
    small = image.copy()
    small.thumbnail((256, 256))
    # Early previews are blurry, later ones sharpen: what denoising previews look like.
    small = small.filter(ImageFilter.GaussianBlur(radius=8 * (1 - progress)))
    buf = io.BytesIO()
    small.save(buf, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


async def _parse_edit_request(host: Host, request: Request) -> EditJob:
    """Multipart (image files + fields) or JSON ({imagePaths|imagePath, prompt, steps, cfg, seed, targetArea})."""
    content_type = request.headers.get("content-type", "")
    images: list[bytes] = []
    if content_type.startswith("multipart/form-data"):
        form = await request.form()
        for key in ("image", "images"):
            for item in form.getlist(key):
                if isinstance(item, UploadFile):
                    images.append(await item.read())
        body = {
            k: _coerce_number(v) if k in _EDIT_NUMBERS else v for k, v in form.items() if isinstance(v, str)
        }
    else:
        body = await _read_json(request)
        names = body.get("imagePaths") or ([body["imagePath"]] if body.get("imagePath") else [])
        for name in names if isinstance(names, list) else [names]:
            path = host.uploads.resolve(name)
            if path is None:
                raise BadInput("imagePath must reference a previously uploaded file.")
            images.append(path.read_bytes())
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise BadInput(PROMPT_REQUIRED)
    if not images:
        raise BadInput("image is required.")  # ASSUMPTION: wording
    aspect = _image_aspect(images[0])
    if aspect is None:
        raise ModelRefusal("Could not read the input image.")  # ASSUMPTION: wording
    steps = _number(body, "steps", integer=True) or host.spec.steps
    cfg = _number(body, "cfg", integer=False) or 2.5
    area = _number(body, "targetArea", integer=True) or 1024 * 1024
    width, height = _fit_area(int(area), aspect, 16)
    seed = _pick_seed(_number(body, "seed", integer=True))
    return EditJob(
        prompt=prompt, images=images, width=width, height=height, steps=int(steps), cfg=cfg, seed=seed
    )


_EDIT_NUMBERS = frozenset({"steps", "cfg", "seed", "targetArea"})


def _coerce_number(value: str) -> Any:
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return value


# --------------------------------------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------------------------------------


async def _read_json(request: Request) -> Json:
    return _parse_json(await request.body())


def _parse_json(raw: bytes) -> Json:
    try:
        body = json.loads(raw or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadBody(str(exc)) from None
    if not isinstance(body, dict):
        raise BadBody("The JSON value could not be converted to the request type.")
    return body


def _host(request: Request) -> Host:
    return request.app.state.host


async def _until_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def _unless_disconnected(receive: Receive, work: Callable[[], Awaitable[Json]]) -> Json | None:
    """Run `work`, cancelling it if the client hangs up first (None then): a render dies with its client."""
    result: Json | None = None
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            await _until_disconnect(receive)
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        try:
            result = await work()
        except _ClientGone:
            result = None
        tg.cancel_scope.cancel()
    return result


class EventStream:
    """An SSE response whose producer is cancelled as soon as the client disconnects.

    Written as a bare ASGI response (not StreamingResponse + async generator) so the cancellation reaches
    the render deterministically: the disconnect watcher cancels the task group the producer runs in,
    which unwinds the render, releases the lock and writes no final frame.
    """

    def __init__(self, produce: Callable[[Emit], Awaitable[Json | None]]) -> None:
        self.produce = produce

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [
            (b"content-type", b"text/event-stream"),
            (b"cache-control", b"no-cache"),
            (b"connection", b"keep-alive"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})

        async def emit(frame: Json) -> None:
            data = b"data: " + json.dumps(frame, separators=(",", ":")).encode() + b"\n\n"
            try:
                await send({"type": "http.response.body", "body": data, "more_body": True})
            except OSError as exc:
                raise _ClientGone() from exc

        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                await _until_disconnect(receive)
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            try:
                final = await self.produce(emit)
                if final is not None:
                    await emit(final)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            except _ClientGone:
                # The render was abandoned (client gone, or /__emulator__/reset): end the body without a
                # final frame; if the client is gone this send is a no-op or fails quietly.
                with contextlib.suppress(Exception):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
            tg.cancel_scope.cancel()


def _error_frame(message: str) -> Json:
    return {"done": True, "error": message}


# ---- info routes -----------------------------------------------------------------------------------------


async def health(request: Request) -> Response:
    return PlainTextResponse("TensorSharp.Server.Host is running")


async def models(request: Request) -> Response:
    spec = _host(request).spec
    return JSONResponse(
        {
            "models": [spec.file],
            "mmProjModels": [],
            "loaded": spec.file,
            "loadedMmProj": None,
            "visionReady": False,
            "acceptsVisionProjector": False,
            "loadedBackend": "ggml_cuda",
            "defaultBackend": "ggml_cuda",
            "supportedBackends": ["ggml_cpu", "ggml_cuda", "cpu", "cuda"],
            "architecture": spec.architecture,
            "contextTokens": 0,
            "modelContextTokens": 0,
            "defaultMaxTokens": 20000,
            "video": spec.video,
            "skills": None,
        }
    )


async def models_load(request: Request) -> Response:
    spec = _host(request).spec
    try:
        body = await _read_json(request)
    except BadBody as exc:
        return _api_error(f"Could not read the request body: {exc}")
    name = body.get("model")
    if not isinstance(name, str) or pathlib.Path(name).name != spec.file:
        # Only the startup pair can be (re)loaded.
        return JSONResponse(
            {"ok": False, "error": f"Only the hosted model '{spec.file}' can be loaded."}, 400
        )
    return JSONResponse(
        {"ok": True, "model": spec.file, "loadedMmProj": None, "architecture": spec.architecture}
    )


async def queue_status(request: Request) -> Response:
    # The chat engine's counters: video and image-edit jobs run under their own lock and never show here.
    return JSONResponse({"busy": False, "processing": 0, "pending_requests": 0, "total_processed": 0})


async def version(request: Request) -> Response:
    return JSONResponse({"version": "0.1.0"})


# ---- uploads ---------------------------------------------------------------------------------------------

_KINDS = {
    "image": {".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".heic", ".heif", ".tif", ".tiff"},
    "video": {".mp4", ".mov", ".webm", ".mkv", ".avi", ".m4v"},
    "audio": {".wav", ".mp3", ".flac", ".ogg", ".m4a", ".aac", ".opus"},
    "pdf": {".pdf"},
    "text": {".txt", ".md", ".csv", ".json", ".py", ".js", ".ts", ".html", ".css", ".xml", ".yaml", ".yml",
             ".c", ".cpp", ".h", ".cs", ".java", ".go", ".rs", ".sh", ".log", ".ini", ".toml"},
}  # fmt: skip


async def upload(request: Request) -> Response:
    host = _host(request)
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        return _api_error("Expected multipart form data")
    if int(request.headers.get("content-length") or 0) > MAX_BODY_BYTES:
        return _api_error("Request body too large.", 413)  # ASSUMPTION: wording
    form = await request.form()
    item = next((v for _, v in form.multi_items() if isinstance(v, UploadFile)), None)
    if item is None:
        return _api_error("No file was uploaded.")  # ASSUMPTION: wording
    original = item.filename or "upload"
    ext = pathlib.Path(original).suffix.lower()
    kind = next((k for k, exts in _KINDS.items() if ext in exts), None)
    if kind is None:
        return _api_error(
            f"Unsupported file type '{ext}'. Upload an image, video, audio, PDF, or plain-text/code file."
        )
    path = host.uploads.new_name(ext)
    data = await item.read()
    await anyio.to_thread.run_sync(path.write_bytes, data)
    reply: Json = {"ok": True, "file": path.name, "url": f"/uploads/{path.name}", "mediaType": kind,
                   "fileName": original}  # fmt: skip
    if kind == "image" and ext in (".heic", ".heif"):
        preview = path.with_suffix(".jpg")
        await anyio.to_thread.run_sync(_heic_preview, preview, original)
        reply["previewUrl"] = f"/uploads/{preview.name}"
    elif kind == "video":
        try:
            frames = await anyio.to_thread.run_sync(_extract_frames, path)
        except RuntimeError as exc:
            path.unlink(missing_ok=True)
            return JSONResponse({"ok": False, "error": f"Could not read the video: {exc}"}, 400)
        reply["frames"] = [f.name for f in frames]
        reply["frameUrls"] = [f"/uploads/{f.name}" for f in frames]
    elif kind == "text":
        reply.update(_text_reply(ext, data))
    elif kind == "pdf":
        reply.update(_pdf_reply(data))
    return JSONResponse(reply)


def _heic_preview(path: pathlib.Path, label: str) -> None:
    # Pillow cannot decode HEIC without a plugin; the preview is a stand-in JPEG of the right kind.
    image = Image.new("RGB", (320, 240), (60, 60, 70))
    ImageDraw.Draw(image).text((10, 110), f"preview: {label}"[:40], fill=(255, 255, 255))
    image.save(path, format="JPEG")


def _extract_frames(path: pathlib.Path) -> list[pathlib.Path]:
    """Up to 8 frames at 1 fps, like the vision pipeline's sampling; raises RuntimeError if unreadable."""
    pattern = path.with_name(f"{path.stem}-frame-%03d.jpg")
    media._run_ffmpeg(["-i", str(path), "-vf", "fps=1", "-frames:v", "8", "-q:v", "4", str(pattern)])
    frames = sorted(path.parent.glob(f"{path.stem}-frame-*.jpg"))
    if not frames:
        raise RuntimeError("no frames could be decoded")
    return frames


def _text_reply(ext: str, data: bytes) -> Json:
    if ext == ".csv":
        return {"fileBacked": True}
    return {
        "textContent": data.decode("utf-8", errors="replace"),
        "truncated": False,
        "truncateLimit": None,
        "truncateUnit": None,
        "modelContextLimit": 0,
        "originalTokenCount": None,
        "returnedTokenCount": None,
    }


def _pdf_reply(data: bytes) -> Json:
    # A real text-layer extraction is out of scope; report the page count and the literal strings found.
    pages = len(re.findall(rb"/Type\s*/Page(?!s)", data))
    text = " ".join(s.decode("latin-1") for s in re.findall(rb"\(([^()]*)\)\s*Tj", data))
    return {"renderedAsImages": False, "pageCount": pages, "extractedPageCount": pages, "textContent": text,
            "complete": True, "warning": None}  # fmt: skip


async def serve_upload(request: Request) -> Response:
    path = _host(request).uploads.resolve(request.path_params["name"])
    if path is None:
        return Response(status_code=404)
    return FileResponse(path)


# ---- video -----------------------------------------------------------------------------------------------


async def video_generate(request: Request) -> Response:
    host = _host(request)
    try:
        job = parse_video_request(host.spec, host.uploads, await _read_json(request))
    except BadBody as exc:
        return _api_error(f"Could not read the request body: {exc}")
    except (BadInput, ModelRefusal) as exc:
        return _api_error(str(exc))
    result = await _unless_disconnected(request.receive, lambda: host.render_video(job, _no_emit))
    if result is None:
        return Response(status_code=499)  # nobody is listening any more
    return JSONResponse({"ok": True, **result})


async def video_generate_stream(request: Request) -> Response:
    host = _host(request)
    # Read the body before the stream starts: from then on the disconnect watcher owns `receive`.
    raw = await request.body()

    async def produce(emit: Emit) -> Json | None:
        if host.spec.video is None:
            return _error_frame(NOT_VIDEO_MODEL)
        try:
            job = parse_video_request(host.spec, host.uploads, _parse_json(raw))
        except BadBody as exc:
            return _error_frame(f"Bad request: {exc}")
        except (BadInput, ModelRefusal) as exc:
            return _error_frame(str(exc))
        try:
            return {"done": True, **await host.render_video(job, emit)}
        except (_ClientGone, anyio.get_cancelled_exc_class()):
            raise
        except Exception as exc:  # noqa: BLE001 - the Host streams any run exception's message
            return _error_frame(str(exc))

    return EventStream(produce)  # type: ignore[return-value]


async def openai_video_generations(request: Request) -> Response:
    host = _host(request)
    try:
        body = await _read_json(request)
    except BadBody as exc:
        return _v1_error(f"Could not read the request body: {exc}")
    size = body.get("size")
    if size is not None:
        match = re.fullmatch(r"\s*(\d+)\s*[xX×]\s*(\d+)\s*", str(size))
        if not match:
            return _v1_error("size must look like '832x480'.")  # ASSUMPTION: wording
        body = {**body, "width": int(match[1]), "height": int(match[2])}
    if "negative_prompt" in body and "negativePrompt" not in body:
        body = {**body, "negativePrompt": body["negative_prompt"]}
    try:
        job = parse_video_request(host.spec, host.uploads, body)
    except BadInput as exc:
        return _v1_error(str(exc))
    except ModelRefusal:
        # Not caught by this route: it reaches ApiExceptionMiddleware and becomes a generic 500.
        return _v1_error(SERVER_FAILED, 500, "internal_error")
    result = await _unless_disconnected(request.receive, lambda: host.render_video(job, _no_emit))
    if result is None:
        return Response(status_code=499)
    b64 = None
    if body.get("response_format") == "b64_json":
        mp4 = host.uploads.root / pathlib.Path(result["url"]).name
        b64 = base64.b64encode(await anyio.to_thread.run_sync(mp4.read_bytes)).decode()
    return JSONResponse(
        {
            "created": int(time.time()),
            "data": [{"url": result["url"], "b64_json": b64}],
            "audio_url": result["audioUrl"],
            "width": result["width"],
            "height": result["height"],
            "frames": result["frames"],
            "fps": result["fps"],
            "seed": result["seed"],
            "codec": result["codec"],
            "elapsed_seconds": result["elapsedSeconds"],
        }
    )


async def _no_emit(frame: Json) -> None:
    return None


# ---- image edit ------------------------------------------------------------------------------------------


async def image_edit(request: Request) -> Response:
    host = _host(request)
    if not host.spec.edits:
        return _api_error(NOT_EDIT_MODEL)
    try:
        job = await _parse_edit_request(host, request)
    except BadBody as exc:
        return _api_error(f"Could not read the request body: {exc}")
    except (BadInput, ModelRefusal) as exc:
        return _api_error(str(exc))
    result = await _unless_disconnected(request.receive, lambda: host.render_edit(job, _no_emit))
    if result is None:
        return Response(status_code=499)
    return JSONResponse({"ok": True, **result})


async def image_edit_stream(request: Request) -> Response:
    host = _host(request)
    if not host.spec.edits:
        # ASSUMPTION: like video, a plain 400 for the wrong model ("Requests against a model that is not
        # Qwen-Image-Edit return 400"), before the stream starts.
        return _api_error(NOT_EDIT_MODEL)

    # Parse before the stream starts (the disconnect watcher owns `receive` afterwards); refusals still
    # travel as frames on the 200 stream.
    job: EditJob | None = None
    try:
        job = await _parse_edit_request(host, request)
    except BadBody as exc:
        error = f"Bad request: {exc}"
    except (BadInput, ModelRefusal) as exc:
        error = str(exc)

    async def produce(emit: Emit) -> Json | None:
        if job is None:
            return _error_frame(error)
        try:
            return {"done": True, **await host.render_edit(job, emit)}
        except (_ClientGone, anyio.get_cancelled_exc_class()):
            raise
        except Exception as exc:  # noqa: BLE001 - the Host streams any run exception's message
            return _error_frame(str(exc))

    return EventStream(produce)  # type: ignore[return-value]


# ---- control API -----------------------------------------------------------------------------------------


async def control_counters(request: Request) -> Response:
    return JSONResponse(_host(request).counters.snapshot())


async def control_reset_counters(request: Request) -> Response:
    _host(request).counters.reset()
    return JSONResponse({"ok": True})


async def control_speed(request: Request) -> Response:
    host = _host(request)
    try:
        speed = float((await _read_json(request)).get("speed"))
    except (BadBody, TypeError, ValueError):
        speed = float("nan")
    if not math.isfinite(speed) or speed <= 0:
        return JSONResponse({"error": "speed must be a positive number"}, 400)
    host.speed = speed
    return JSONResponse({"ok": True, "speed": speed})


async def control_reset(request: Request) -> Response:
    """Back to a fresh device: cancel in-flight renders, forget uploads and counters, restore the speed."""
    host = _host(request)
    host.cancel_all()
    await anyio.sleep(0)  # let cancelled renders unwind and release the lock
    host.uploads.clear()
    host.counters.reset()
    host.speed = host.initial_speed
    return JSONResponse({"ok": True})


# ---- app -------------------------------------------------------------------------------------------------


class _CountRequests:
    """Counts device-facing requests as "METHOD /route/template" (control routes are not counted)."""

    def __init__(self, app: ASGIApp, counters: Counters) -> None:
        self.app = app
        self.counters = counters

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope["path"].startswith("/__emulator__/"):
            path = "/uploads/{name}" if scope["path"].startswith("/uploads/") else scope["path"]
            self.counters.requests[f"{scope['method']} {path}"] += 1
        await self.app(scope, receive, send)


async def _on_http_error(request: Request, exc: Exception) -> Response:
    # ASP.NET answers unknown routes and wrong methods with an empty body.
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    return Response(status_code=status)


async def _on_crash(request: Request, exc: Exception) -> Response:
    if request.url.path.startswith("/v1/"):
        return _v1_error(SERVER_FAILED, 500, "internal_error")
    return _api_error(SERVER_FAILED, 500)


def create_app(
    *, model: str = "minimax-h3", speed: float = 60, data_dir: pathlib.Path | None = None
) -> Starlette:
    """The emulated TensorSharp.Server.Host hosting `model` ("minimax-h3", "wan" or "qwen-image-edit")."""
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; choose one of {', '.join(MODELS)}")
    if speed <= 0:
        raise ValueError("speed must be positive")
    root = (
        pathlib.Path(data_dir) if data_dir else pathlib.Path(tempfile.mkdtemp(prefix="tensorsharp-emulator-"))
    )
    host = Host(MODELS[model], speed, root)
    routes = [
        Route("/health", health),
        Route("/api/models", models),
        Route("/api/models/load", models_load, methods=["POST"]),
        Route("/api/queue/status", queue_status),
        Route("/api/version", version),
        Route("/api/upload", upload, methods=["POST"]),
        Route("/uploads/{name}", serve_upload),
        Route("/api/video-generate", video_generate, methods=["POST"]),
        Route("/api/video-generate/stream", video_generate_stream, methods=["POST"]),
        Route("/v1/videos/generations", openai_video_generations, methods=["POST"]),
        Route("/api/image-edit", image_edit, methods=["POST"]),
        Route("/api/image-edit/stream", image_edit_stream, methods=["POST"]),
        Route("/__emulator__/counters", control_counters),
        Route("/__emulator__/reset_counters", control_reset_counters, methods=["POST"]),
        Route("/__emulator__/speed", control_speed, methods=["POST"]),
        Route("/__emulator__/reset", control_reset, methods=["POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _on_http_error, Exception: _on_crash})
    app.state.host = host
    app.add_middleware(_CountRequests, counters=host.counters)
    return app
