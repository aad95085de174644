"""TensorSharp.Server.Host's forms: video (its grid, its cfg cap, its modes) and image edit, for the loaded model."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from jobs.kinds.forms.base import ImageForm, VideoForm
from jobs.kinds.forms.messages import set_range
from jobs.kinds.forms.uploads import clean_image_upload


def snap_frames(frames: int, grid: str) -> int:
    """TensorSharp snaps frames to its grid: 17k+5 (MiniMax-H3) or 4k+1 (Wan); we snap the same way, nearest."""
    if grid == "17k+5":
        k = max(0, round((frames - 5) / 17))
        return 17 * k + 5
    if grid == "4k+1":
        k = max(0, round((frames - 1) / 4))
        return 4 * k + 1
    return frames


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
        self._check_canvas(data)
        self._check_frames(data)
        if data.get("ts_steps") is None:
            self.add_error("ts_steps", "Give the number of steps.")
        self._check_cfg(data.get("cfg"))
        self._check_mode(data)
        if not self.block:
            raise ValidationError("The model loaded on this server is not a video model.")
        return data

    def _check_canvas(self, data: dict[str, Any]) -> None:
        """Width and height given, each a multiple of 32."""
        for dim in ("width", "height"):
            v = data.get(dim)
            if v is None:
                self.add_error(dim, f"Give the {dim} in pixels.")
            elif v % 32:
                self.add_error(dim, f"The {dim} must be a multiple of 32 (e.g. {32 * round(v / 32) or 32}).")

    def _check_frames(self, data: dict[str, Any]) -> None:
        """Frames given, snapped to the model's grid (as TensorSharp would)."""
        ts = self.caps.tensorsharp
        if data.get("frames") is None:
            self.add_error("frames", "Give the number of frames.")
        elif ts and ts.frame_grid:
            data["frames"] = snap_frames(data["frames"], ts.frame_grid)

    def _check_cfg(self, cfg: float | None) -> None:
        """A CFG-distilled model refuses guidance above its cap."""
        ts = self.caps.tensorsharp
        if cfg is not None and ts and ts.max_cfg is not None and cfg > ts.max_cfg:
            self.add_error(
                "cfg",
                f"This model is CFG-distilled: guidance above {ts.max_cfg:g} is refused. "
                "Leave it at 1 and raise the steps for quality.",
            )

    def _check_mode(self, data: dict[str, Any]) -> None:
        """The mode and the images agree: i2v needs a start image, fl2v both, t2v none."""
        mode = data.get("video_mode") or "t2v"
        if mode == "i2v" and not data.get("start_image"):
            self.add_error("start_image", "“Start image to video” needs a start image.")
        if mode == "fl2v" and not (data.get("start_image") and data.get("end_image")):
            self.add_error("end_image", "“First and last frame” needs both a start and an end image.")
        if mode == "t2v" and (data.get("start_image") or data.get("end_image")):
            self.add_error("video_mode", "Images were given: choose a mode that uses them.")

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
