"""The estimate of each (device kind, job kind): the shape that groups renders of comparable cost, and the seed.

A shape is the ``RenderStat`` key the planner (``jobs.queue.eta``) learns under; a seed is the device-seconds
from the reference's measured numbers before any history exists: MiniMax-H3-Turbo 2 s @832x480/4 steps ≈ 7 min,
7 s ≈ 12 min, 5 s @1344x768 ≈ 32 min (the same anchors as the emulator's ``video_render_seconds``); Hunyuan3D
shape ≈ 7 min; Z-Image ≈ 7.9 s per 512² image at 8 steps; Foundation-1 ≈ 68 s per 20 s loop; TensorSharp's own
examples (H3 640x384x22f/8 steps ≈ 63 s, Wan 832x480x81f/50 steps ≈ 270 s, Qwen-Image-Edit ≈ 40 s).
``jobs.kinds.table`` names which pair uses which. Pure functions: no database, no device.
"""

from __future__ import annotations

import math
from typing import Any

_BASE_PX = 832 * 480
_PX_EXP = math.log(31 / 9) / math.log((1344 * 768) / _BASE_PX)  # fitted to the 1344x768 anchor
#: Each 3D stage's seconds (the mesh seed, and the Tiiny mesh runner's share of each stage for the poll rhythm).
STAGE_3D_SECONDS = {"shape": 420.0, "simplify": 40.0, "texture": 540.0, "export": 15.0}


def tiiny_video_seconds(width: int, height: int, seconds: float, steps: int) -> float:
    return 60.0 + 15.0 * steps * ((width * height) / _BASE_PX) ** _PX_EXP * (seconds + 4.0)


def stage_3d_seconds(stage: str) -> float:
    """A 3D stage's seconds (60 for one the reference did not time)."""
    return STAGE_3D_SECONDS.get(stage, 60.0)


def _wh(size: str, default: tuple[int, int] = (512, 512)) -> tuple[int, int]:
    try:
        w, h = str(size).lower().split("x", 1)
        return int(w), int(h)
    except (ValueError, AttributeError):
        return default


def _words(text: str) -> int:
    return max(1, len(str(text or "").split()))


def tiiny_video_shape(model_id: str, p: dict[str, Any]) -> str:
    return f"{p.get('size')}:{p.get('seconds')}s:{p.get('steps')}st"


def tiiny_video_seed(model_id: str, p: dict[str, Any]) -> float:
    w, h = _wh(p.get("size", "832x480"), (832, 480))
    return tiiny_video_seconds(w, h, float(p.get("seconds", 2)), int(p.get("steps", 7)))


def ts_video_shape(model_id: str, p: dict[str, Any]) -> str:
    return f"{p.get('width')}x{p.get('height')}:{p.get('frames')}f:{p.get('steps')}st"


def ts_video_seed(model_id: str, p: dict[str, Any]) -> float:
    w, h = int(p.get("width", 640)), int(p.get("height", 384))
    frames, steps = int(p.get("frames", 22)), int(p.get("steps", 20))
    mpf = w * h * max(frames, 1) / 1e6
    if "wan" in model_id.lower():
        return 3.0 + steps * mpf * 0.153 + mpf * 0.6
    return 2.0 + steps * mpf * 1.23 + mpf * 1.2 + 1.5


def tiiny_image_shape(model_id: str, p: dict[str, Any]) -> str:
    return f"{p.get('size')}:{p.get('steps')}st:x{p.get('n', 1)}"


def tiiny_image_seed(model_id: str, p: dict[str, Any]) -> float:
    w, h = _wh(p.get("size", "512x512"))
    per = max(1.0, 7.9 * (w * h) / (512 * 512) * int(p.get("steps") or 9) / 8)
    return (per + 1.0) * int(p.get("n", 1) or 1)


def ts_edit_shape(model_id: str, p: dict[str, Any]) -> str:
    return f"edit:{p.get('steps')}st"


def ts_edit_seed(model_id: str, p: dict[str, Any]) -> float:
    return 3.0 + int(p.get("steps") or 30) * 1.05 * 1.88 + 1.5


def mesh_shape(model_id: str, p: dict[str, Any]) -> str:
    return "+".join(p.get("stages") or ["shape"])


def mesh_seed(model_id: str, p: dict[str, Any]) -> float:
    return sum(stage_3d_seconds(s) for s in p.get("stages") or ["shape"])


def music_shape(model_id: str, p: dict[str, Any]) -> str:
    return f"{p.get('seconds')}s:{p.get('steps', '')}"


def music_seed(model_id: str, p: dict[str, Any]) -> float:
    seconds = float(p.get("seconds", 20))
    if "songgeneration" in model_id.lower():
        return 2 * 20.0 + 1.5 * (float(p.get("preview_seconds", 10)) + seconds)
    return 68.0 * seconds / 20.0


def speech_shape(model_id: str, p: dict[str, Any]) -> str:
    return f"w{10 * (_words(p.get('input', '')) // 10)}"  # per 10 words


def speech_seed(model_id: str, p: dict[str, Any]) -> float:
    return 0.5 + _words(p.get("input", "")) * 0.4 / 2.1 + 1.0
