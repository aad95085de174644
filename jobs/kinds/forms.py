"""Submit forms, one per (device kind, job kind), built from the device's reported capabilities.

Every field the device would reject is refused here with a message a person understands, so nothing reaches
the device that it will turn down (reference: tiiny-device-api.md, field notes §11). The forms only validate
fields; what the hub expects of a valid request (estimate, start and ready times, warnings, refusals) is
``jobs.queue.admission``, the one path every door (page, REST, /v1) goes through. ``jobs.kinds.table`` says which form
serves which pair.
"""

from __future__ import annotations

import datetime as dt
import io
import struct
import warnings
import wave
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.utils import timezone
from PIL import Image, UnidentifiedImageError

from devices.capabilities import BROKEN_3D_STAGES, Capabilities, voices_for_model
from jobs.models import JobKind, When

MAX_IMAGE_BYTES = 10 * 1024 * 1024
MAX_AUDIO_BYTES = 10 * 1024 * 1024
IMAGE_TYPES = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp"}
AUDIO_TYPES = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav", "audio/vnd.wave": "wav"}
SUPERTONIC_WHY = (
    "Supertonic-3 fails through the device's API: the API passes the full id "
    "“Supertone/supertonic-3” and the model's own server only accepts “Supertonic-3”. "
    "Choose another speech model."
)


# A decoded image costs about 4 bytes a pixel: 40 MP is far beyond any model's input (a 4K frame is
# 8.3 MP) and still bounds a decompression bomb (a few KB declaring 20000x20000) to what the hub can afford.
MAX_IMAGE_PIXELS = 40_000_000
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


class _TooBig(Exception):
    def __init__(self, size: tuple[int, int]) -> None:
        self.size = size


def _decode_image(data: bytes, label: str) -> tuple[str, tuple[int, int]]:
    """Decode the whole image with Pillow, refusing a bomb before any pixel is allocated."""
    kind = f"{label} must be a PNG, JPEG or WebP image"
    try:
        with warnings.catch_warnings():
            # Pillow warns above its own limit (~89 MP) and raises above twice that; both are a refusal.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=list(IMAGE_FORMATS)) as probe:
                fmt, size = probe.format, probe.size
                if size[0] * size[1] > MAX_IMAGE_PIXELS:
                    raise _TooBig(size)
                probe.verify()  # structure and checksums (PNG chunks' CRCs)
            with Image.open(io.BytesIO(data), formats=list(IMAGE_FORMATS)) as image:
                if image.size != size:
                    raise ValueError("size changed between two reads")
                image.load()  # every pixel: a truncated or corrupt body fails here
    except _TooBig as big:
        w, h = big.size
        raise ValidationError(
            f"{label} is {w}×{h} pixels ({w * h / 1e6:.0f} MP); the limit is {MAX_IMAGE_PIXELS // 10**6} MP."
        ) from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ValidationError(
            f"{label} declares more pixels than the limit of {MAX_IMAGE_PIXELS // 10**6} MP."
        ) from None
    except UnidentifiedImageError:
        raise ValidationError(f"{kind}.") from None
    except Exception:  # noqa: BLE001 - Pillow raises many types (OSError, SyntaxError, struct.error, …) on bad bytes
        raise ValidationError(f"{kind}; this one is damaged or cut short and can't be decoded.") from None
    return IMAGE_FORMATS[fmt], size


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


# -- messages that name the allowed values -----------------------------------------------------------------------
# Django's generic messages ("Select a valid choice", "Ensure this value is less than or equal to 240") don't
# say what would do. Every field of every form gets one that does ("Steps: 10 to 250"), from its own bounds,
# choices and length; a form sets its own where the device's rule is sharper (``set_range``, or an explicit
# ``error_messages`` entry, which the generic pass leaves alone).
REQUIRED_MESSAGES = {
    "model": "A model is required: choose one.",
    "prompt": "A prompt is required: what should it show?",
    "input": "The text to speak is required.",
    "image": "A picture is required (PNG, JPEG or WebP).",
    "seconds": "The length in seconds is required.",
}


def _num(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _pct(text: Any) -> str:
    """Literal text inside a message Django %-formats with its params."""
    return str(text).replace("%", "%%")


def _or(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def span(values: list[int]) -> str:
    """``4 to 8`` for a run of whole numbers, else ``4, 6 or 8``."""
    values = sorted(values)
    if len(values) > 2 and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]} to {values[-1]}"
    return _or([str(v) for v in values])


def set_range(field: forms.Field, lo: Any, hi: Any, message: str) -> None:
    """New bounds for a number field after the form is built (they depend on the model): the validators, the
    input's ``min``/``max`` and every message about them agree."""
    field.min_value, field.max_value = lo, hi
    field.validators = [
        v for v in field.validators if not isinstance(v, (MinValueValidator, MaxValueValidator))
    ]
    if lo is not None:
        field.validators.append(MinValueValidator(lo))
        field.widget.attrs["min"] = lo
    if hi is not None:
        field.validators.append(MaxValueValidator(hi))
        field.widget.attrs["max"] = hi
    for code in ("min_value", "max_value", "invalid"):
        field.error_messages[code] = message


def _defaults(field: forms.Field) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for cls in reversed(type(field).__mro__):
        out.update(getattr(cls, "default_error_messages", {}))
    return out


def _generic_messages(name: str, field: forms.Field) -> dict[str, str]:
    label = _pct(field.label or name.replace("_", " ").capitalize())
    out = {"required": _pct(REQUIRED_MESSAGES.get(name) or f"“{label}” is required.")}
    if isinstance(field, (forms.IntegerField, forms.FloatField)):
        lo, hi = field.min_value, field.max_value
        whole = "a number" if isinstance(field, forms.FloatField) else "a whole number"  # Float is an Integer
        if lo is not None and hi is not None:
            out["min_value"] = out["max_value"] = f"{label}: {_num(lo)} to {_num(hi)}."
            out["invalid"] = f"{label}: {whole} from {_num(lo)} to {_num(hi)}."
        elif lo is not None:
            out["min_value"] = f"{label}: at least {_num(lo)}."
            out["invalid"] = f"{label}: {whole}, at least {_num(lo)}."
        else:
            out["invalid"] = f"{label}: {whole}."
    elif isinstance(field, forms.ChoiceField):
        names = [_pct(text) for value, text in field.choices if value not in ("", None)]
        if names:
            out["invalid_choice"] = f"{label}: choose {_or(names)}."
    elif isinstance(field, forms.DateTimeField):
        out["invalid"] = f"{label}: a date and time, e.g. 2026-12-01 23:00."
    elif isinstance(field, forms.FileField):
        out["missing"] = out["invalid"] = f"{label}: choose a file."
    if isinstance(field, forms.CharField) and field.max_length:
        out["max_length"] = f"{label}: at most {field.max_length} characters (this has %(show_value)d)."
    return out


def explain_fields(form: forms.Form) -> None:
    """Replace every Django generic message still on the form's fields with one naming the allowed values."""
    for name, field in form.fields.items():
        defaults = _defaults(field)
        for code, text in _generic_messages(name, field).items():
            current = field.error_messages.get(code)
            if current is None or current is defaults.get(code) or current == defaults.get(code):
                field.error_messages[code] = text


class JobForm(forms.Form):
    """Fields every kind shares: the model, when to run, politeness, sharing."""

    kind: str = ""
    model = forms.ChoiceField(label="Model")
    when = forms.ChoiceField(choices=When.choices, initial=When.ASAP, label="When")
    not_before = forms.DateTimeField(
        required=False, label="Not before", help_text="Only with “Not before a time”."
    )
    polite = forms.BooleanField(
        required=False,
        initial=True,
        label="Polite",
        help_text="By day, don't unload a model someone else loaded (e.g. a chat).",
    )
    shared = forms.BooleanField(required=False, initial=False, label="Share with the household")

    def __init__(self, data=None, files=None, *, device, user=None, **kw: Any) -> None:
        super().__init__(data, files, **kw)
        self.device = device
        self.user = user
        self.caps = Capabilities.from_dict(device.capabilities)
        self.fields["model"].choices = [(m, label) for m, label in self.model_choices()]
        if len(self.fields["model"].choices) == 1:
            self.fields["model"].initial = self.fields["model"].choices[0][0]
        if getattr(
            user, "is_admin", False
        ):  # admins may lift their own limits for one job (jobs.quotas.services)
            self.fields["lift_limits"] = forms.BooleanField(
                required=False,
                initial=False,
                label="Lift my limits for this job",
                help_text="Admins only: queue it even over a quota; the job's story records it.",
            )

    # -- to override --------------------------------------------------------------------------------------
    def model_choices(self) -> list[tuple[str, str]]:
        return []

    def cleaned_params(self) -> dict[str, Any]:
        raise NotImplementedError

    def upload_files(self) -> dict[str, Any]:
        """Files the job keeps as inputs (saved under its folder by ``job_submit``)."""
        return {}

    @classmethod
    def fields_from_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """A job's stored parameters as this form's fields (the inverse of ``cleaned_params``): what "run
        again" fills the form with, on the page and through the API."""
        return {k: v for k, v in params.items() if k != "files"}

    # -- shared ------------------------------------------------------------------------------------------
    def _name(self, model_id: str) -> str:
        m = self.caps.model(model_id)
        name = (m.name if m else model_id.rsplit("/", 1)[-1]) or model_id
        return f"{name} (loaded)" if m and m.loaded else name

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if not self.fields["model"].choices:
            raise ValidationError(
                f"This device has no model for {JobKind(self.kind).label.lower()} right now."
            )
        when = data.get("when")
        nb = data.get("not_before")
        if when == When.NOT_BEFORE:
            if not nb:
                self.add_error("not_before", "Give the time the job may start.")
            elif nb < timezone.now() - dt.timedelta(minutes=1):
                self.add_error("not_before", "That time has already passed.")
        return data

    def full_clean(self) -> None:
        # Last, so bounds and choices set by a subclass (from the chosen model) are the ones named.
        explain_fields(self)
        super().full_clean()

    def chosen_model(self) -> str:
        """The model the form is for: the posted one when it is offered, else the initial, else the first."""
        ids = [c for c, _ in self.fields["model"].choices]
        raw = self.data.get("model") if self.is_bound else None
        raw = raw if raw in ids else (self.initial.get("model") or self.fields["model"].initial)
        return raw if raw in ids else (ids[0] if ids else "")

    def schedule(self) -> dict[str, Any]:
        """``when``, ``not_before``, ``polite``, ``shared`` (and an admin's ``lift_limits``) for ``job_submit``."""
        d = self.cleaned_data
        return {
            "when": d.get("when") or When.ASAP,
            "not_before": d.get("not_before") if d.get("when") == When.NOT_BEFORE else None,
            "polite": bool(d.get("polite")),
            "shared": bool(d.get("shared")),
            **({"lift_limits": bool(d.get("lift_limits"))} if "lift_limits" in self.fields else {}),
        }


# ======================================================================================================
# Video
# ======================================================================================================


def snap_frames(frames: int, grid: str) -> int:
    """TensorSharp snaps frames to its grid: 17k+5 (MiniMax-H3) or 4k+1 (Wan); we snap the same way, nearest."""
    if grid == "17k+5":
        k = max(0, round((frames - 5) / 17))
        return 17 * k + 5
    if grid == "4k+1":
        k = max(0, round((frames - 1) / 4))
        return 4 * k + 1
    return frames


class VideoForm(JobForm):
    """What every video form shares; ``TiinyVideoForm`` and ``TensorSharpVideoForm`` add the device's fields."""

    kind = JobKind.VIDEO
    prompt = forms.CharField(widget=forms.Textarea, max_length=4000, label="Prompt")
    seed = forms.IntegerField(required=False, min_value=0, max_value=2**31 - 1, label="Seed")
    start_image = forms.FileField(required=False, label="Start image (optional)")

    def clean_start_image(self):
        return clean_image_upload(self.cleaned_data.get("start_image"), label="The start image")

    def upload_files(self) -> dict[str, Any]:
        return {k: self.cleaned_data[k] for k in ("start_image", "end_image") if self.cleaned_data.get(k)}

    def _with_seed(self, p: dict[str, Any]) -> dict[str, Any]:
        if self.cleaned_data.get("seed") is not None:
            p["seed"] = self.cleaned_data["seed"]
        return p


class TiinyVideoForm(VideoForm):
    """Tiiny ``/v1/videos``: a size among the model's canvases, 1..7 seconds, its step options."""

    size = forms.ChoiceField(required=False, label="Size")
    seconds = forms.IntegerField(required=False, min_value=1, max_value=7, initial=2, label="Length (s)")
    steps = forms.TypedChoiceField(required=False, coerce=int, label="Steps")

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        cap = self._cap(self.chosen_model() or None)
        canvases = cap.canvases if cap else []
        steps = cap.step_options if cap else []
        self.fields["size"].choices = [(c, c) for c in canvases]
        self.fields["steps"].choices = [(s, str(s)) for s in steps]
        # Name the allowed values, not Django's "Select a valid choice".
        self.fields["size"].error_messages["invalid_choice"] = (
            f"This model only renders {', '.join(canvases)}." if canvases else "This model reports no sizes."
        )
        self.fields["steps"].error_messages["invalid_choice"] = (
            f"Steps must be one of {', '.join(map(str, steps))}." if steps else "This model reports no steps."
        )
        if cap:
            self.fields["steps"].initial = cap.default_steps
            self.fields["seconds"].help_text = f"1 to {cap.max_seconds} seconds (the device's limit)."
            set_range(
                self.fields["seconds"],
                1,
                cap.max_seconds,
                f"The device renders 1 to {cap.max_seconds} seconds; longer fails at once.",
            )

    def _cap(self, model_id: str | None):
        if model_id:
            return self.caps.video_for(str(model_id))
        vids = self.caps.video_models()
        return vids[0] if vids else None

    def model_choices(self) -> list[tuple[str, str]]:
        ids = list(self.caps.video) or [m.id for m in self.caps.models_of_kind("video")]
        return [(i, self._name(i)) for i in ids]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        cap = self._cap(data.get("model"))
        if cap is None:
            return data
        if "size" in self.errors:
            pass  # already refused with the sizes it renders
        elif not data.get("size"):
            self.add_error("size", f"Choose one of the sizes this model renders: {', '.join(cap.canvases)}.")
        elif data["size"] not in cap.canvases:
            self.add_error("size", f"This model only renders {', '.join(cap.canvases)}.")
        seconds = data.get("seconds")
        if seconds is None:
            self.add_error("seconds", "Give the length in seconds.")
        elif not 1 <= seconds <= cap.max_seconds:
            self.add_error(
                "seconds", f"The device renders 1 to {cap.max_seconds} seconds; longer fails at once."
            )
        if data.get("steps") in (None, ""):
            data["steps"] = cap.default_steps
        elif cap.step_options and data["steps"] not in cap.step_options:
            self.add_error("steps", f"Steps must be one of {', '.join(map(str, cap.step_options))}.")
        return data

    def cleaned_params(self) -> dict[str, Any]:
        d = self.cleaned_data
        return self._with_seed(
            {"prompt": d["prompt"], "size": d["size"], "seconds": int(d["seconds"]), "steps": int(d["steps"])}
        )


class TensorSharpVideoForm(VideoForm):
    """TensorSharp ``/api/video-generate/stream``: the loaded model only, its grid, its cfg cap and modes."""

    width = forms.IntegerField(required=False, min_value=32, max_value=2048, initial=640, label="Width")
    height = forms.IntegerField(required=False, min_value=32, max_value=2048, initial=384, label="Height")
    frames = forms.IntegerField(required=False, min_value=1, max_value=481, initial=22, label="Frames")
    ts_steps = forms.IntegerField(required=False, min_value=1, max_value=100, initial=8, label="Steps")
    cfg = forms.FloatField(required=False, min_value=0, max_value=20, label="Guidance (cfg)")
    video_mode = forms.ChoiceField(required=False, label="Mode")
    end_image = forms.FileField(required=False, label="End image (optional)")
    generate_audio = forms.BooleanField(required=False, initial=True, label="Audio track")

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        ts = self.caps.tensorsharp
        block = self.block
        modes = [("t2v", "Text to video")]
        if block.get("supportsImageConditioning"):
            modes.append(("i2v", "Start image to video"))
        if block.get("supportsEndImageConditioning"):
            modes.append(("fl2v", "First and last frame"))
        self.fields["video_mode"].choices = modes
        self.fields["video_mode"].initial = "t2v"
        if not block.get("supportsEndImageConditioning"):
            del self.fields["end_image"]
        if not block.get("supportsAudio"):
            del self.fields["generate_audio"]
        if not block.get("supportsImageConditioning"):
            del self.fields["start_image"]
        if ts and ts.max_cfg is not None:
            self.fields["cfg"].help_text = f"At most {ts.max_cfg:g} for this model (it is CFG-distilled)."
            set_range(
                self.fields["cfg"],
                0,
                ts.max_cfg,
                f"This model is CFG-distilled: guidance above {ts.max_cfg:g} is refused. "
                "Leave it at 1 and raise the steps for quality.",
            )
        for dim in ("width", "height"):
            set_range(self.fields[dim], 32, 2048, f"{dim.capitalize()}: 32 to 2048 pixels, a multiple of 32.")

    @classmethod
    def fields_from_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        data = super().fields_from_params(params)
        if "steps" in data:
            data["ts_steps"] = data.pop("steps")
        return data

    @property
    def block(self) -> dict[str, Any]:
        ts = self.caps.tensorsharp
        return (ts.video if ts else None) or {}

    def model_choices(self) -> list[tuple[str, str]]:
        ts = self.caps.tensorsharp
        return [(ts.loaded, ts.loaded)] if ts and ts.video is not None and ts.loaded else []

    def clean_end_image(self):
        return clean_image_upload(self.cleaned_data.get("end_image"), label="The end image")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        ts = self.caps.tensorsharp
        for dim in ("width", "height"):
            v = data.get(dim)
            if v is None:
                self.add_error(dim, f"Give the {dim} in pixels.")
            elif v % 32:
                self.add_error(dim, f"The {dim} must be a multiple of 32 (e.g. {32 * round(v / 32) or 32}).")
        if data.get("frames") is None:
            self.add_error("frames", "Give the number of frames.")
        elif ts and ts.frame_grid:
            data["frames"] = snap_frames(data["frames"], ts.frame_grid)
        if data.get("ts_steps") is None:
            self.add_error("ts_steps", "Give the number of steps.")
        cfg = data.get("cfg")
        if cfg is not None and ts and ts.max_cfg is not None and cfg > ts.max_cfg:
            self.add_error(
                "cfg",
                f"This model is CFG-distilled: guidance above {ts.max_cfg:g} is refused. "
                "Leave it at 1 and raise the steps for quality.",
            )
        mode = data.get("video_mode") or "t2v"
        if mode == "i2v" and not data.get("start_image"):
            self.add_error("start_image", "“Start image to video” needs a start image.")
        if mode == "fl2v" and not (data.get("start_image") and data.get("end_image")):
            self.add_error("end_image", "“First and last frame” needs both a start and an end image.")
        if mode == "t2v" and (data.get("start_image") or data.get("end_image")):
            self.add_error("video_mode", "Images were given: choose a mode that uses them.")
        if not self.block:
            raise ValidationError("The model loaded on this server is not a video model.")
        return data

    def cleaned_params(self) -> dict[str, Any]:
        d = self.cleaned_data
        p = {
            "prompt": d["prompt"],
            "width": d["width"],
            "height": d["height"],
            "frames": d["frames"],
            "steps": d["ts_steps"],
            "video_mode": d.get("video_mode") or "t2v",
        }
        if d.get("cfg") is not None:
            p["cfg"] = d["cfg"]
        if "generate_audio" in self.fields:
            p["generate_audio"] = bool(d.get("generate_audio"))
        return self._with_seed(p)


# ======================================================================================================
# 3D
# ======================================================================================================


class MeshForm(JobForm):
    kind = JobKind.MESH
    image = forms.FileField(label="Picture of the object", help_text="PNG, JPEG or WebP, up to 10 MB.")
    simplify = forms.BooleanField(required=False, initial=True, label="Simplify the mesh")
    texture = forms.BooleanField(required=False, initial=True, label="Paint a texture")
    seed = forms.IntegerField(required=False, min_value=0, max_value=2**31 - 1, label="Seed")
    steps = forms.IntegerField(required=False, min_value=5, max_value=100, initial=30, label="Shape steps")
    target_faces = forms.IntegerField(
        required=False, min_value=1000, max_value=500000, initial=40000, label="Faces after simplifying"
    )

    def model_choices(self) -> list[tuple[str, str]]:
        return [(m.id, self._name(m.id)) for m in self.caps.models_of_kind("3d")]

    def clean_image(self):
        return clean_image_upload(self.cleaned_data.get("image"), label="The picture")

    @classmethod
    def fields_from_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        data = super().fields_from_params(params)
        stages = data.pop("stages", None) or []
        data["simplify"], data["texture"] = "simplify" in stages, "texture" in stages
        data.pop("format", None)
        return data

    def stages(self) -> list[str]:
        offered = [
            s
            for s in (self.caps.stages_3d or ["shape", "simplify", "texture", "export"])
            if s not in BROKEN_3D_STAGES
        ]  # never the broken background stage
        want = ["shape"]
        if self.cleaned_data.get("simplify") and "simplify" in offered:
            want.append("simplify")
        if self.cleaned_data.get("texture") and "texture" in offered:
            want.append("texture")
        want.append("export")
        return want

    def cleaned_params(self) -> dict[str, Any]:
        d = self.cleaned_data
        p: dict[str, Any] = {"stages": self.stages(), "format": "glb", "steps": d.get("steps") or 30}
        if d.get("seed") is not None:
            p["seed"] = d["seed"]
        if "simplify" in p["stages"]:
            p["target_faces"] = d.get("target_faces") or 40000
        return p

    def upload_files(self) -> dict[str, Any]:
        return {"image": self.cleaned_data["image"]}


# ======================================================================================================
# Music
# ======================================================================================================


class MusicForm(JobForm):
    kind = JobKind.MUSIC
    prompt = forms.CharField(
        required=False,
        max_length=2000,
        label="Describe the sound",
        help_text="Foundation-1: instruments, tempo, key, mood.",
    )
    caption = forms.CharField(
        required=False,
        max_length=2000,
        label="Describe the song",
        help_text="SongGeneration: style, mood, instruments.",
    )
    lyrics = forms.CharField(required=False, widget=forms.Textarea, max_length=6000, label="Lyrics")
    generation_type = forms.ChoiceField(
        required=False,
        initial="mixed",
        label="Tracks",
        choices=[
            ("mixed", "Song (vocals and music)"),
            ("bgm", "Music only"),
            ("vocal", "Vocals only"),
            ("separate", "Separate tracks"),
        ],
    )
    seconds = forms.IntegerField(min_value=1, max_value=240, initial=20, label="Length (s)")
    steps = forms.IntegerField(required=False, min_value=10, max_value=250, initial=75, label="Steps")
    cfg_scale = forms.FloatField(required=False, min_value=1, max_value=15, initial=7, label="Guidance")
    seed = forms.IntegerField(required=False, min_value=0, max_value=2**31 - 1, label="Seed")

    def model_choices(self) -> list[tuple[str, str]]:
        return [
            (m.id, self._name(m.id))
            for m in self.caps.models_of_kind("music") + self.caps.models_of_kind("song")
        ]

    #: What each model makes, in seconds (field notes §8): the length field names the chosen model's range.
    SONG_SECONDS = (10, 240)
    LOOP_SECONDS = (1, 47)

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        seconds = self.fields["seconds"]
        if self._is_song(self.chosen_model()):
            lo, hi = self.SONG_SECONDS
            set_range(seconds, lo, hi, f"SongGeneration makes songs of {lo} to {hi} seconds.")
            seconds.help_text = f"{lo} to {hi} seconds."
        else:
            lo, hi = self.LOOP_SECONDS
            set_range(seconds, lo, hi, f"Foundation-1 makes loops of {lo} to {hi} seconds.")
            seconds.help_text = f"{lo} to {hi} seconds."

    def _is_song(self, model_id: str | None) -> bool:
        m = self.caps.model(model_id or "")
        return bool(m and m.kind == "song") or "songgeneration" in str(model_id).lower()

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        mid = data.get("model")
        seconds = data.get("seconds")
        if self._is_song(mid):
            if not (data.get("caption") or "").strip() and not (data.get("lyrics") or "").strip():
                self.add_error("caption", "Describe the song or give lyrics.")
            lo, hi = self.SONG_SECONDS
            if seconds is not None and not lo <= seconds <= hi:
                self.add_error("seconds", f"SongGeneration makes songs of {lo} to {hi} seconds.")
        elif mid:
            if not (data.get("prompt") or "").strip():
                self.add_error("prompt", "Describe the sound.")
            lo, hi = self.LOOP_SECONDS
            if seconds is not None and not lo <= seconds <= hi:
                self.add_error("seconds", f"Foundation-1 makes loops of {lo} to {hi} seconds.")
        return data

    def cleaned_params(self) -> dict[str, Any]:
        d = self.cleaned_data
        if self._is_song(d["model"]):
            # The device ignores seconds_total on resume, so the preview already asks for the full length.
            p = {
                "caption": d.get("caption") or "",
                "lyrics": d.get("lyrics") or "",
                "generation_type": d.get("generation_type") or "mixed",
                "seconds": d["seconds"],
                "preview_seconds": min(10, d["seconds"]),
            }
        else:
            p = {
                "prompt": d["prompt"],
                "seconds": d["seconds"],
                "steps": d.get("steps") or 75,
                "cfg_scale": d.get("cfg_scale") or 7.0,
            }
        if d.get("seed") is not None:
            p["seed"] = d["seed"]
        return p


# ======================================================================================================
# Image
# ======================================================================================================


class ImageForm(JobForm):
    """What every image form shares: a prompt, a seed, steps."""

    kind = JobKind.IMAGE
    prompt = forms.CharField(widget=forms.Textarea, max_length=4000, label="Prompt")
    seed = forms.IntegerField(required=False, min_value=0, max_value=2**31 - 1, label="Seed")
    steps = forms.IntegerField(required=False, min_value=1, max_value=100, label="Steps")

    def _with_seed(self, p: dict[str, Any]) -> dict[str, Any]:
        if self.cleaned_data.get("seed") is not None:
            p["seed"] = self.cleaned_data["seed"]
        return p


class TiinyImageForm(ImageForm):
    """Tiiny ``/v1/images/generations``: one image per request; the hub asks n times."""

    negative_prompt = forms.CharField(required=False, max_length=2000, label="Avoid")
    width = forms.IntegerField(required=False, min_value=256, max_value=2048, initial=1024, label="Width")
    height = forms.IntegerField(required=False, min_value=256, max_value=2048, initial=1024, label="Height")
    n = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=8,
        initial=1,
        label="How many",
        help_text="The device makes one image per request; the hub asks once per image.",
    )

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        for dim in ("width", "height"):
            set_range(
                self.fields[dim], 256, 2048, f"{dim.capitalize()}: 256 to 2048 pixels, a multiple of 16."
            )

    def model_choices(self) -> list[tuple[str, str]]:
        return [(m.id, self._name(m.id)) for m in self.caps.models_of_kind("image")]

    @classmethod
    def fields_from_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        data = super().fields_from_params(params)
        if "x" in str(data.get("size", "")):
            data["width"], data["height"] = str(data.pop("size")).split("x", 1)
        return data

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        for dim in ("width", "height"):
            v = data.get(dim)
            if v is None:
                self.add_error(dim, f"Give the {dim} in pixels.")
            elif v % 16:
                self.add_error(dim, f"The {dim} must be a multiple of 16 (e.g. {16 * round(v / 16)}).")
        return data

    def cleaned_params(self) -> dict[str, Any]:
        d = self.cleaned_data
        p: dict[str, Any] = {
            "prompt": d["prompt"],
            "size": f"{d['width']}x{d['height']}",
            "n": d.get("n") or 1,
            "steps": d.get("steps") or 9,
        }
        if d.get("negative_prompt"):
            p["negative_prompt"] = d["negative_prompt"]
        return self._with_seed(p)


class TensorSharpEditForm(ImageForm):
    """TensorSharp ``/api/image-edit/stream``: a picture to edit with the loaded edit model."""

    image = forms.FileField(label="Picture to edit")
    cfg = forms.FloatField(required=False, min_value=0, max_value=20, label="Guidance (cfg)")

    def model_choices(self) -> list[tuple[str, str]]:
        return [(m.id, m.name) for m in self.caps.models_of_kind("image_edit") if m.loaded]

    def clean_image(self):
        return clean_image_upload(self.cleaned_data.get("image"), label="The picture")

    def cleaned_params(self) -> dict[str, Any]:
        d = self.cleaned_data
        p: dict[str, Any] = {"prompt": d["prompt"], "steps": d.get("steps") or 30}
        if d.get("cfg") is not None:
            p["cfg"] = d["cfg"]
        return self._with_seed(p)

    def upload_files(self) -> dict[str, Any]:
        return {"image": self.cleaned_data["image"]}


# ======================================================================================================
# Speech
# ======================================================================================================


class SpeechForm(JobForm):
    kind = JobKind.SPEECH
    input = forms.CharField(widget=forms.Textarea, max_length=5000, label="Text to speak")
    voice = forms.CharField(required=False, max_length=100, label="Voice")
    instruct = forms.CharField(
        required=False,
        max_length=500,
        label="Describe the voice",
        help_text="For VoiceDesign, e.g. “A calm, warm female voice.”",
    )
    ref_audio = forms.FileField(required=False, label="Voice to clone (WAV)")
    ref_text = forms.CharField(required=False, max_length=2000, label="What the recording says")
    language = forms.CharField(required=False, max_length=20, label="Language")
    response_format = forms.ChoiceField(
        choices=[("wav", "WAV"), ("mp3", "MP3")], initial="wav", label="Format"
    )

    def model_choices(self) -> list[tuple[str, str]]:
        # Supertonic is never offered: it fails through the API whatever is sent (see SUPERTONIC_WHY).
        return [
            (m.id, self._name(m.id))
            for m in self.caps.tts_models()
            if voices_for_model(m.id).mode != "broken"
        ]

    def voice_spec(self, model_id: str):
        return voices_for_model(model_id)

    def full_clean(self) -> None:
        # A posted Supertonic id isn't among the choices; say why instead of "not one of the choices".
        if self.is_bound and "supertonic" in str(self.data.get("model", "")).lower():
            super().full_clean()
            self._errors["model"] = self.error_class([SUPERTONIC_WHY])
            self.cleaned_data.pop("model", None)
            return
        super().full_clean()

    def clean_ref_audio(self):
        return clean_wav_upload(self.cleaned_data.get("ref_audio"))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        mid = data.get("model")
        if not mid:
            return data
        spec = self.voice_spec(mid)
        voice = (data.get("voice") or "").strip()
        if spec.mode == "preset":
            if spec.voices and not voice:
                data["voice"] = spec.voices[0]
            elif voice and spec.voices and voice not in spec.voices and "vibevoice" not in mid.lower():
                self.add_error("voice", f"This model's voices are: {', '.join(spec.voices)}.")
            elif voice and "vibevoice" in mid.lower() and not _vibevoice_like(voice):
                self.add_error(
                    "voice", "VibeVoice speakers look like “en-Emma_woman” (language-Name_gender)."
                )
        elif spec.mode == "instruct":
            if voice:
                self.add_error("voice", "This model has no preset voices; describe the voice instead.")
            if not (data.get("instruct") or "").strip():
                self.add_error("instruct", "Describe the voice you want.")
        elif spec.mode == "clone":
            if voice:
                self.add_error("voice", "This model only clones: give a recording and its transcript.")
            if not data.get("ref_audio"):
                self.add_error("ref_audio", "Give a short WAV recording of the voice to clone.")
            if not (data.get("ref_text") or "").strip():
                self.add_error("ref_text", "Type what the recording says.")
        return data

    def cleaned_params(self) -> dict[str, Any]:
        d = self.cleaned_data
        spec = self.voice_spec(d["model"])
        p: dict[str, Any] = {"input": d["input"], "response_format": d.get("response_format") or "wav"}
        if spec.mode == "preset" and d.get("voice"):
            p["voice"] = d["voice"]
        if spec.mode == "instruct":
            p["instruct"] = d["instruct"]
        if spec.mode == "clone":
            p["ref_text"] = d["ref_text"]
        if d.get("language"):
            p["language"] = d["language"]
        return p

    def upload_files(self) -> dict[str, Any]:
        return {"ref_audio": self.cleaned_data["ref_audio"]} if self.cleaned_data.get("ref_audio") else {}


def _vibevoice_like(voice: str) -> bool:
    head, _, tail = voice.partition("-")
    return bool(head) and bool(tail) and (tail.endswith("_woman") or tail.endswith("_man"))


def form_class_for(kind: str, device) -> type[JobForm]:
    """The form for ``kind`` on ``device`` (one per device kind and job kind; see ``jobs.kinds.table``)."""
    from jobs.kinds.table import spec_for

    return spec_for(device.kind, kind).form
