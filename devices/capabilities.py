"""What a device can do, as a typed, JSON-serialisable snapshot.

The clients build a ``Capabilities`` from the device's answers (``TiinyClient.capabilities()``,
``TensorSharpClient.capabilities()``); ``Device.capabilities`` stores ``caps.to_dict()``; the job forms read it
back with ``Capabilities.from_dict(device.capabilities)`` and ask ``caps.video_models()``,
``caps.tts_models()`` and friends (voices: ``voices_for_model(model_id)``). Nothing here does I/O.

Two facts are not available from the device through port 80 and come from the reference instead:
* TTS voices (the per-model table in tiiny-device-api.md, "Text to speech: which voice to send");
* video options of a model that is not loaded (``/v1/video/info`` only answers for a loaded model), so the last
  snapshot's answer is carried forward, or the reference's MiniMax-H3-Turbo values are used.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

#: The device refuses renders longer than this ("no exported bucket fits", reference /v1/videos).
TIINY_VIDEO_MAX_SECONDS = 7

#: Hunyuan3D's ``background`` stage is broken on the device (BriefNet missing): never offered.
BROKEN_3D_STAGES = frozenset({"background"})
#: Keep this many NPU units free beyond what a model needs, or unload first ("fake fit", reference quirks):
#: the device may answer "fits" and then never start the load. The client and the scheduler both use it.
NPU_MARGIN = 5
DEFAULT_3D_STAGES = ("shape", "simplify", "texture", "export")

ModelKind = Literal[
    "chat",
    "image",
    "image_edit",
    "video",
    "tts",
    "asr",
    "music",
    "song",
    "3d",
    "embedding",
    "rerank",
    "ocr",
    "other",
]
VoiceMode = Literal["preset", "instruct", "clone", "broken"]


@dataclass
class ModelCap:
    id: str
    name: str
    kind: str
    type: str = ""
    npu_usage: int | None = None
    loaded: bool = False
    status: str = ""
    #: seconds from launch to running, as the device's model list says (``load_time``); None when it doesn't
    load_s: float | None = None


@dataclass
class VideoCap:
    model_id: str
    canvases: list[str]
    step_options: list[int]
    default_steps: int
    fps: int
    max_seconds: int = TIINY_VIDEO_MAX_SECONDS
    max_keyframes: int = 0
    audio: dict[str, Any] | None = None
    #: "device" (read now), "previous" (carried from the last snapshot), "reference" (documented defaults)
    source: str = "device"


@dataclass
class VoiceSpec:
    mode: str  # VoiceMode
    voices: list[str] = field(default_factory=list)
    note: str = ""


@dataclass
class TensorSharpCap:
    architecture: str = ""
    loaded: str = ""
    backend: str = ""
    #: the ``video`` block of ``/api/models`` as the server sent it (None for non-video models)
    video: dict[str, Any] | None = None
    #: what the hub derives from the family: frame grid and fps rules
    frame_grid: str = ""
    fps: int | None = None
    size_multiple: int = 32
    max_cfg: float | None = None


@dataclass
class VaultCap:
    """The vault's nightly memory summaries (``/kb/memory/schedule``, ``/kb/memory/model``); None = unknown/off."""

    summary_start_hour: int | None = None
    summary_end_hour: int | None = None
    summary_model: str | None = None


@dataclass
class Capabilities:
    kind: str  # "tiiny" | "tensorsharp"
    models: list[ModelCap] = field(default_factory=list)
    video: dict[str, VideoCap] = field(default_factory=dict)
    stages_3d: list[str] = field(default_factory=list)
    npu_total: int | None = None
    npu_available: int | None = None
    tensorsharp: TensorSharpCap | None = None
    versions: dict[str, str] = field(default_factory=dict)
    vault: VaultCap = field(default_factory=VaultCap)

    # -- serialisation -------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Capabilities:
        if not data:
            return cls(kind="unknown")
        ts = data.get("tensorsharp")
        return cls(
            kind=data.get("kind", "unknown"),
            models=[ModelCap(**m) for m in data.get("models", [])],
            video={k: VideoCap(**v) for k, v in (data.get("video") or {}).items()},
            stages_3d=list(data.get("stages_3d", [])),
            npu_total=data.get("npu_total"),
            npu_available=data.get("npu_available"),
            tensorsharp=TensorSharpCap(**ts) if ts else None,
            versions=dict(data.get("versions") or {}),
            vault=VaultCap(**(data.get("vault") or {})),
        )

    # -- helpers for forms and the scheduler ---------------------------------------------------------------
    def model(self, model_id: str) -> ModelCap | None:
        return next((m for m in self.models if m.id == model_id), None)

    def loaded_models(self) -> list[ModelCap]:
        return [m for m in self.models if m.loaded]

    def models_of_kind(self, kind: str) -> list[ModelCap]:
        return [m for m in self.models if m.kind == kind]

    def video_models(self) -> list[VideoCap]:
        """Video models with their options (Tiiny); for TensorSharp the loaded video model, if any."""
        return list(self.video.values())

    def video_for(self, model_id: str) -> VideoCap | None:
        return self.video.get(model_id)

    def tts_models(self) -> list[ModelCap]:
        return self.models_of_kind("tts")

    def npu_cost(self, model_id: str) -> int | None:
        m = self.model(model_id)
        return m.npu_usage if m else None


def offered(caps: dict[str, Any] | None) -> dict[str, Any]:
    """Stored capabilities without what changes between reads of the same device (which Tiiny model is loaded
    now, free NPU, versions, the vault): two reads alike here offer the same jobs."""
    out = {k: v for k, v in (caps or {}).items() if k not in ("npu_available", "versions", "vault")}
    out["models"] = [
        {k: m.get(k) for k in ("id", "kind", "type")} if isinstance(m, dict) else m
        for m in out.get("models") or []
    ]
    return out


# -- vault -------------------------------------------------------------------------------------------------


def vault_cap(schedule: dict[str, Any], model: dict[str, Any]) -> VaultCap:
    """Normalise the two vault answers (``{}`` each when the firmware has no vault).

    An empty ``model_id`` (or ``automatic_summary_enabled: false``) means automatic summaries are off; a
    disabled schedule means no window.
    """

    def hour(value: Any) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 23 else None

    window_on = schedule.get("enabled") is not False
    summaries_on = model.get("automatic_summary_enabled") is not False
    return VaultCap(
        summary_start_hour=hour(schedule.get("nightly_start_hour")) if window_on else None,
        summary_end_hour=hour(schedule.get("nightly_end_hour")) if window_on else None,
        summary_model=(str(model.get("model_id") or "") or None) if summaries_on else None,
    )


# -- model kinds -------------------------------------------------------------------------------------------

_TYPE_KIND = {
    "text generation": "chat",
    "image-text-to-text": "chat",
    "text-to-speech": "tts",
    "asr": "asr",
    "automatic speech recognition": "asr",
    "text embedding": "embedding",
    "text reranking": "rerank",
    "text-to-image": "image",
    "image-to-image": "image_edit",
    "image editing": "image_edit",
    "image-to-text": "ocr",
    "music generation": "music",
    "text-to-video": "video",
    "image-to-video": "video",
    "video generation": "video",
    "image-to-3d": "3d",
    "3d generation": "3d",
}
_CAPABILITY_KIND = {
    "main": "chat",
    "voice": "tts",
    "audio": "asr",
    "asr": "asr",
    "embedding": "embedding",
    "rerank": "rerank",
    "image": "image",
    "ocr": "ocr",
    "music": "music",
    "video": "video",
    "3d": "3d",
}


def model_kind(row: dict[str, Any]) -> str:
    """Classify an installed-model row from ``/api/v1/models/`` (type, capabilities, then the id)."""
    mid = str(row.get("id") or row.get("model_id") or "").lower()
    typ = str(row.get("type") or "").strip().lower()
    # Ids beat the generic type for the kinds whose API differs (songs vs loops, 3D, video).
    kind = _kind_whose_api_differs(mid, typ) or _TYPE_KIND.get(typ)
    if kind:
        return kind
    for cap in row.get("capabilities") or []:
        if str(cap).lower() in _CAPABILITY_KIND:
            return _CAPABILITY_KIND[str(cap).lower()]
    if any(name in mid for name in ("tts", "vibevoice", "supertonic", "kokoro")):
        return "tts"
    return "other"


def _kind_whose_api_differs(mid: str, typ: str) -> str | None:
    """Song, 3D or video, by the model id (or a type that says so), before the generic type decides."""
    if "songgeneration" in mid:
        return "song"
    if "hunyuan3d" in mid or "trellis" in mid or "3d" in typ:
        return "3d"
    if "video" in typ or "minimax-h3" in mid or "wan2" in mid:
        return "video"
    return None


# -- voices: the reference's table (the device lists no voices through port 80) ----------------------------

QWEN_CUSTOMVOICE_SPEAKERS = [
    "aiden",
    "dylan",
    "eric",
    "ono_anna",
    "ryan",
    "serena",
    "sohee",
    "uncle_fu",
    "vivian",
]
#: VibeVoice-Realtime has 61 speakers; the reference names these. More can be typed in by hand.
VIBEVOICE_REALTIME_SPEAKERS = ["en-Emma_woman", "en-Carter_man"]
SUPERTONIC_SPEAKERS = ["F1", "F2", "F3", "F4", "F5", "M1", "M2", "M3", "M4", "M5"]


def voices_for_model(model_id: str) -> VoiceSpec:
    mid = model_id.lower()
    if "moss-tts" in mid:
        return VoiceSpec("preset", ["default"], "Its only speaker.")
    if "customvoice" in mid:
        return VoiceSpec("preset", list(QWEN_CUSTOMVOICE_SPEAKERS))
    if "voicedesign" in mid:
        return VoiceSpec("instruct", [], "Describe the voice, e.g. “A calm, warm female voice.”")
    if "vibevoice-realtime" in mid:
        return VoiceSpec(
            "preset",
            list(VIBEVOICE_REALTIME_SPEAKERS),
            "Match the speaker's language to the text; the first request after a load may fail.",
        )
    if "vibevoice" in mid or ("qwen3-tts" in mid and "base" in mid):
        return VoiceSpec("clone", [], "Voice clone only: a reference recording and its transcript.")
    if "supertonic" in mid:
        return VoiceSpec(
            "broken",
            list(SUPERTONIC_SPEAKERS),
            "Fails through the device API (it passes the full model id to the model's server).",
        )
    return VoiceSpec("preset", [], "Voices for this model are not known; the device's default is used.")


# -- video defaults ----------------------------------------------------------------------------------------


def reference_video_cap(model_id: str) -> VideoCap | None:
    """The reference's MiniMax-H3-Turbo options, for a video model whose info the device cannot give now."""
    if "minimax-h3" not in model_id.lower():
        return None
    return VideoCap(
        model_id=model_id,
        canvases=["1344x768", "768x1344", "832x480", "480x832"],
        step_options=[4, 5, 6, 7, 8],
        default_steps=7,
        fps=24,
        max_keyframes=2,
        audio={"sample_rate": 32000, "channels": 2},
        source="reference",
    )


def video_cap_from_info(model_id: str, info: dict[str, Any]) -> VideoCap:
    """Normalise ``/v1/video/info?model=`` (tolerant: canvases as "WxH" strings or {width,height})."""
    canvases = [_canvas(c) for c in info.get("canvases") or []]
    step_options = _step_options(info.get("step_options") or [])
    default_steps = int(
        info.get("default_steps") or (step_options[len(step_options) // 2] if step_options else 7)
    )
    max_seconds = int(info.get("max_seconds") or TIINY_VIDEO_MAX_SECONDS)
    audio = info.get("audio")
    if audio is not None and not isinstance(audio, dict):
        audio = {"description": str(audio)}
    return VideoCap(
        model_id=model_id,
        canvases=canvases,
        step_options=step_options,
        default_steps=default_steps,
        fps=int(info.get("fps") or 24),
        max_seconds=min(max_seconds, TIINY_VIDEO_MAX_SECONDS),
        max_keyframes=int(info.get("max_keyframes") or 0),
        audio=audio,
        source="device",
    )


def _canvas(c: Any) -> str:
    """A canvas as "WxH", from "WxH", {width, height} or [width, height]."""
    if isinstance(c, dict):
        return f"{int(c.get('width', 0))}x{int(c.get('height', 0))}"
    if isinstance(c, (list, tuple)) and len(c) == 2:
        return f"{int(c[0])}x{int(c[1])}"
    return str(c)


def _step_options(steps: Any) -> list[int]:
    """Step counts from a list, {"min": 4, "max": 8} or "4-8"."""
    if isinstance(steps, dict):
        steps = range(int(steps.get("min", 4)), int(steps.get("max", 8)) + 1)
    elif isinstance(steps, str) and "-" in steps:
        lo, hi = steps.split("-", 1)
        steps = range(int(lo), int(hi) + 1)
    return [int(s) for s in steps]


def stages_from_3d_caps(info: dict[str, Any] | None) -> list[str]:
    """Stage names from ``/v1/3d/capabilities`` (list of names or of {name}), never the broken ones."""
    if not info:
        return list(DEFAULT_3D_STAGES)
    raw = info.get("stages") or info.get("supported_stages") or []
    if isinstance(raw, dict):
        raw = list(raw.keys())
    names = [str(s.get("name") if isinstance(s, dict) else s) for s in raw]
    return [s for s in names if s and s not in BROKEN_3D_STAGES] or list(DEFAULT_3D_STAGES)


def tensorsharp_cap(models: dict[str, Any]) -> TensorSharpCap:
    arch = str(models.get("architecture") or "")
    video = models.get("video")
    family = str((video or {}).get("family") or arch).lower()
    cap = TensorSharpCap(
        architecture=arch,
        loaded=str(models.get("loaded") or ""),
        backend=str(models.get("loadedBackend") or ""),
        video=video,
    )
    if video is not None:
        if "minimax" in family or "h3" in family:
            cap.frame_grid, cap.fps, cap.max_cfg = "17k+5", 24, 1.0
        elif "wan" in family:
            cap.frame_grid = "4k+1"
    return cap
