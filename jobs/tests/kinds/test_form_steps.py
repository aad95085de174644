"""The named steps of the forms: the generic messages per field type, TensorSharp video's checks, speech's modes.

Each step is called on its own here; ``test_forms.py`` checks the same messages through whole forms."""

from __future__ import annotations

import pytest
from django import forms
from django.forms.utils import ErrorDict

from devices.capabilities import Capabilities, ModelCap, TensorSharpCap
from devices.models import Device
from jobs.kinds.forms import SpeechForm, TensorSharpVideoForm
from jobs.kinds.forms.messages import _generic_messages, _number_messages, _value_messages


def test_a_bounded_number_names_its_range():
    field = forms.IntegerField(min_value=10, max_value=250)
    assert _number_messages("Steps", field) == {
        "min_value": "Steps: 10 to 250.",
        "max_value": "Steps: 10 to 250.",
        "invalid": "Steps: a whole number from 10 to 250.",
    }
    assert _number_messages("Seed", forms.IntegerField(min_value=0)) == {
        "min_value": "Seed: at least 0.",
        "invalid": "Seed: a whole number, at least 0.",
    }
    assert _number_messages("Guidance", forms.FloatField()) == {"invalid": "Guidance: a number."}
    assert (
        _number_messages("Cfg", forms.FloatField(min_value=0.5, max_value=1.5))["max_value"]
        == "Cfg: 0.5 to 1.5."
    )


def test_each_field_type_gets_its_own_messages():
    choice = forms.ChoiceField(choices=[("", "—"), ("wav", "WAV"), ("mp3", "MP3")])
    assert _value_messages("Format", choice) == {"invalid_choice": "Format: choose WAV or MP3."}
    assert _value_messages("Format", forms.ChoiceField(choices=[])) == {}
    assert _value_messages("When", forms.DateTimeField()) == {
        "invalid": "When: a date and time, e.g. 2026-12-01 23:00."
    }
    assert _value_messages("Image", forms.FileField()) == {
        "missing": "Image: choose a file.",
        "invalid": "Image: choose a file.",
    }
    assert _value_messages("Polite", forms.BooleanField()) == {}


def test_the_generic_messages_add_the_required_and_length_ones():
    out = _generic_messages("prompt", forms.CharField(max_length=40, label="Prompt"))
    assert out == {
        "required": "A prompt is required: what should it show?",
        "max_length": "Prompt: at most 40 characters (this has %(show_value)d).",
    }
    assert _generic_messages("ref_text", forms.CharField())["required"] == "“Ref text” is required."


# -- steps of a bound form -----------------------------------------------------------------------------------


def _stepping(form: forms.Form, data: dict) -> dict:
    """The form as its ``clean`` sees it: no errors yet, ``data`` as its cleaned data."""
    form._errors = ErrorDict()
    form.cleaned_data = data
    return data


@pytest.fixture
def ts_form(db):
    caps = Capabilities(
        kind="tensorsharp",
        models=[ModelCap("h3.gguf", "h3.gguf", "video", loaded=True)],
        tensorsharp=TensorSharpCap(
            loaded="h3.gguf",
            frame_grid="17k+5",
            max_cfg=1.0,
            video={"supportsImageConditioning": True, "supportsEndImageConditioning": True},
        ),
    )
    device = Device.objects.create(
        name="t", kind="tensorsharp", base_url="http://127.0.0.1:2", capabilities=caps.to_dict()
    )
    return TensorSharpVideoForm({}, device=device)


def test_the_canvas_needs_both_sides_in_multiples_of_32(ts_form):
    _stepping(ts_form, {"width": 650})
    ts_form._check_canvas(ts_form.cleaned_data)
    assert ts_form.errors == {
        "width": ["The width must be a multiple of 32 (e.g. 640)."],
        "height": ["Give the height in pixels."],
    }


def test_frames_snap_to_the_models_grid(ts_form):
    data = _stepping(ts_form, {"frames": 24})
    ts_form._check_frames(data)
    assert data["frames"] == 22 and not ts_form.errors
    _stepping(ts_form, {})
    ts_form._check_frames(ts_form.cleaned_data)
    assert ts_form.errors == {"frames": ["Give the number of frames."]}


def test_guidance_over_a_distilled_models_cap_is_refused(ts_form):
    _stepping(ts_form, {})
    ts_form._check_cfg(1.0)
    assert not ts_form.errors
    ts_form._check_cfg(3.0)
    assert ts_form.errors["cfg"][0].startswith("This model is CFG-distilled: guidance above 1 is refused.")


@pytest.mark.parametrize(
    "data, errors",
    [
        ({"video_mode": "i2v"}, {"start_image": ["“Start image to video” needs a start image."]}),
        (
            {"video_mode": "fl2v", "start_image": "a.png"},
            {"end_image": ["“First and last frame” needs both a start and an end image."]},
        ),
        ({"start_image": "a.png"}, {"video_mode": ["Images were given: choose a mode that uses them."]}),
        ({"video_mode": "fl2v", "start_image": "a.png", "end_image": "b.png"}, {}),
    ],
)
def test_the_mode_and_the_images_agree(ts_form, data, errors):
    ts_form._check_mode(_stepping(ts_form, dict(data)))
    assert ts_form.errors == errors


@pytest.fixture
def speech_form(db):
    caps = Capabilities(kind="tiiny", models=[ModelCap("Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice", "CV", "tts")])
    device = Device.objects.create(name="p", base_url="http://127.0.0.1:1", capabilities=caps.to_dict())
    return SpeechForm({}, device=device)


def test_a_preset_model_takes_one_of_its_voices_or_its_first(speech_form):
    data = _stepping(speech_form, {})
    speech_form._check_preset(data, "qwen-customvoice", ["aiden", "dylan"], "")
    assert data["voice"] == "aiden" and not speech_form.errors
    speech_form._check_preset(data, "qwen-customvoice", ["aiden", "dylan"], "zed")
    assert speech_form.errors == {"voice": ["This model's voices are: aiden, dylan."]}


def test_vibevoice_takes_any_speaker_of_its_form(speech_form):
    data = _stepping(speech_form, {})
    speech_form._check_preset(data, "VibeVoice-Realtime", ["en-Emma_woman"], "de-Hans_man")
    assert not speech_form.errors
    speech_form._check_preset(data, "VibeVoice-Realtime", ["en-Emma_woman"], "Hans")
    assert speech_form.errors == {
        "voice": ["VibeVoice speakers look like “en-Emma_woman” (language-Name_gender)."]
    }


def test_an_instruct_model_wants_a_description_not_a_voice(speech_form):
    speech_form._check_instruct(_stepping(speech_form, {"instruct": "  "}), "aiden")
    assert speech_form.errors == {
        "voice": ["This model has no preset voices; describe the voice instead."],
        "instruct": ["Describe the voice you want."],
    }


def test_a_clone_model_wants_a_recording_and_its_transcript(speech_form):
    speech_form._check_clone(_stepping(speech_form, {}), "")
    assert speech_form.errors == {
        "ref_audio": ["Give a short WAV recording of the voice to clone."],
        "ref_text": ["Type what the recording says."],
    }
    speech_form._check_clone(_stepping(speech_form, {"ref_audio": "a.wav", "ref_text": "hi"}), "")
    assert not speech_form.errors
