"""The Tiiny Pocket's forms: video, 3D, music, image and speech (reference: tiiny-device-api.md)."""

from __future__ import annotations

from typing import Any

from django import forms

from devices.capabilities import BROKEN_3D_STAGES, voices_for_model
from jobs.kinds.forms.base import ImageForm, JobForm, VideoForm
from jobs.kinds.forms.messages import set_range
from jobs.kinds.forms.uploads import clean_image_upload, clean_wav_upload
from jobs.models import JobKind

# ======================================================================================================
# Video
# ======================================================================================================


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


# ======================================================================================================
# Speech
# ======================================================================================================


SUPERTONIC_WHY = (
    "Supertonic-3 fails through the device's API: the API passes the full id "
    "“Supertone/supertonic-3” and the model's own server only accepts “Supertonic-3”. "
    "Choose another speech model."
)


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
            self._check_preset(data, mid, spec.voices, voice)
        elif spec.mode == "instruct":
            self._check_instruct(data, voice)
        elif spec.mode == "clone":
            self._check_clone(data, voice)
        return data

    def _check_preset(self, data: dict[str, Any], mid: str, voices: list[str], voice: str) -> None:
        """A voice among the model's (the first when none is given); VibeVoice takes any speaker of its form."""
        vibevoice = "vibevoice" in mid.lower()
        if voices and not voice:
            data["voice"] = voices[0]
        elif voice and voices and voice not in voices and not vibevoice:
            self.add_error("voice", f"This model's voices are: {', '.join(voices)}.")
        elif voice and vibevoice and not _vibevoice_like(voice):
            self.add_error("voice", "VibeVoice speakers look like “en-Emma_woman” (language-Name_gender).")

    def _check_instruct(self, data: dict[str, Any], voice: str) -> None:
        """No preset voice: a description of one."""
        if voice:
            self.add_error("voice", "This model has no preset voices; describe the voice instead.")
        if not (data.get("instruct") or "").strip():
            self.add_error("instruct", "Describe the voice you want.")

    def _check_clone(self, data: dict[str, Any], voice: str) -> None:
        """No preset voice: a recording to clone and what it says."""
        if voice:
            self.add_error("voice", "This model only clones: give a recording and its transcript.")
        if not data.get("ref_audio"):
            self.add_error("ref_audio", "Give a short WAV recording of the voice to clone.")
        if not (data.get("ref_text") or "").strip():
            self.add_error("ref_text", "Type what the recording says.")

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
