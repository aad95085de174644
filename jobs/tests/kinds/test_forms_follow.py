"""Forms follow the model and keep what was typed (issue 11).

Messages name the allowed values on every form (never Django's generic ones); the submit page swaps the fields
that depend on the model as soon as one is chosen; a refused or invalid submit comes back with every typed value
and its uploads kept; the submit button is disabled, with the reason beside it, while a refusal stands.
"""

from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from devices.capabilities import Capabilities, ModelCap, TensorSharpCap, VideoCap
from jobs.kinds.forms import (
    MeshForm,
    MusicForm,
    SpeechForm,
    TensorSharpEditForm,
    TensorSharpVideoForm,
    TiinyImageForm,
    TiinyVideoForm,
)
from jobs.kinds.table import SPECS
from jobs.models import Job
from jobs.tests.ui_fixtures import PNG

pytestmark = pytest.mark.django_db

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"
WAN = "Wan-AI/Wan2.2-TI2V-5B"
MESH = "tencent/Hunyuan3D-2.1"
LOOP = "RoyalCities/Foundation-1"
SONG = "tencent/SongGeneration-v2-large"
IMAGE = "Tongyi-MAI/Z-Image-Turbo"
PRESET = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
DESIGN = "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign"
CLONE = "Qwen/Qwen3-TTS-12Hz-1.7B-Base"
GENERIC = (
    "Select a valid choice",
    "Ensure this value",
    "Ensure that",
    "This field is required",
    "Enter a whole number",
    "Enter a number",
    "Enter a valid",
    "No file was submitted",
)
WAV = (  # a real 16-bit mono WAV of 100 frames: recordings are parsed
    b"RIFF" + (36 + 200).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little")
    + (1).to_bytes(2, "little") + (1).to_bytes(2, "little") + (16000).to_bytes(4, "little")
    + (32000).to_bytes(4, "little") + (2).to_bytes(2, "little") + (16).to_bytes(2, "little")
    + b"data" + (200).to_bytes(4, "little") + b"\x01\x00" * 100
)  # fmt: skip


def tiiny_caps() -> dict:
    return Capabilities(
        kind="tiiny",
        models=[
            ModelCap(VIDEO, "MiniMax-H3-Turbo", "video", loaded=True, npu_usage=40),
            ModelCap(WAN, "Wan2.2", "video", npu_usage=40),
            ModelCap(MESH, "Hunyuan3D-2.1", "3d", npu_usage=30),
            ModelCap(LOOP, "Foundation-1", "music", npu_usage=10),
            ModelCap(SONG, "SongGeneration", "song", npu_usage=28),
            ModelCap(IMAGE, "Z-Image-Turbo", "image", npu_usage=20),
            ModelCap(PRESET, "CustomVoice", "tts", npu_usage=5),
            ModelCap(DESIGN, "VoiceDesign", "tts", npu_usage=5),
            ModelCap(CLONE, "Base", "tts", npu_usage=5),
        ],
        video={
            VIDEO: VideoCap(VIDEO, ["1344x768", "768x1344", "832x480", "480x832"], [4, 5, 6, 7, 8], 7, 24),
            WAN: VideoCap(WAN, ["1280x704", "704x1280"], [20, 30, 40], 30, 24, max_seconds=5),
        },
        stages_3d=["shape", "simplify", "texture", "export"],
        npu_total=100,
    ).to_dict()


def ts_caps() -> dict:
    return Capabilities(
        kind="tensorsharp",
        models=[
            ModelCap("h3.gguf", "h3.gguf", "video", loaded=True),
            ModelCap("qwen-edit.gguf", "Qwen-Image-Edit", "image_edit", loaded=True),
        ],
        tensorsharp=TensorSharpCap(
            architecture="minimax-h3",
            loaded="h3.gguf",
            frame_grid="17k+5",
            fps=24,
            max_cfg=1.0,
            video={"family": "minimax-h3", "supportsAudio": True, "supportsImageConditioning": True},
        ),
    ).to_dict()


def _device(name: str, kind: str, caps: dict):
    from devices.models import Device
    from devices.services import device_register

    d = device_register(
        name=name, kind=kind, base_url="http://127.0.0.1:9", api_key="k" if kind == "tiiny" else ""
    )
    Device.objects.filter(pk=d.pk).update(state=Device.State.ONLINE, capabilities=caps)
    d.refresh_from_db()
    return d


@pytest.fixture
def pocket(db):
    return _device("Pocket", "tiiny", tiiny_caps())


@pytest.fixture
def server(db):
    return _device("Server", "tensorsharp", ts_caps())


def errors_of(form_class, device, user, data, files=None) -> dict[str, list[str]]:
    form = form_class({"when": "asap", **data}, files, device=device, user=user)
    form.is_valid()
    return {k: list(v) for k, v in form.errors.items()}


# -- messages name the allowed values, on every form ----------------------------------------------------------
CASES = [
    # (form, model, field, value, message)
    (TiinyVideoForm, VIDEO, "seconds", "9", "The device renders 1 to 7 seconds; longer fails at once."),
    (TiinyVideoForm, VIDEO, "seconds", "0", "The device renders 1 to 7 seconds; longer fails at once."),
    (TiinyVideoForm, WAN, "seconds", "6", "The device renders 1 to 5 seconds; longer fails at once."),
    (TiinyVideoForm, VIDEO, "steps", "3", "Steps must be one of 4, 5, 6, 7, 8."),
    (TiinyVideoForm, WAN, "steps", "8", "Steps must be one of 20, 30, 40."),
    (
        TiinyVideoForm,
        VIDEO,
        "size",
        "640x640",
        "This model only renders 1344x768, 768x1344, 832x480, 480x832.",
    ),
    (TiinyVideoForm, VIDEO, "seed", "-1", "Seed: 0 to 2147483647."),
    (TiinyVideoForm, VIDEO, "seed", "soon", "Seed: a whole number from 0 to 2147483647."),
    (TiinyVideoForm, VIDEO, "prompt", "x" * 4001, "Prompt: at most 4000 characters (this has 4001)."),
    (
        TiinyVideoForm,
        VIDEO,
        "when",
        "someday",
        "When: choose As soon as possible, Tonight (the device's night window) or Not before a time.",
    ),
    (
        TiinyVideoForm,
        "nope/Model",
        "model",
        "nope/Model",
        "Model: choose MiniMax-H3-Turbo (loaded) or Wan2.2.",
    ),
    (MusicForm, LOOP, "seconds", "300", "Foundation-1 makes loops of 1 to 47 seconds."),
    (MusicForm, LOOP, "seconds", "48", "Foundation-1 makes loops of 1 to 47 seconds."),
    (MusicForm, SONG, "seconds", "300", "SongGeneration makes songs of 10 to 240 seconds."),
    (MusicForm, SONG, "seconds", "5", "SongGeneration makes songs of 10 to 240 seconds."),
    (MusicForm, SONG, "seconds", "", "The length in seconds is required."),
    (MusicForm, LOOP, "steps", "5", "Steps: 10 to 250."),
    (MusicForm, LOOP, "cfg_scale", "20", "Guidance: 1 to 15."),
    (MusicForm, LOOP, "cfg_scale", "lots", "Guidance: a number from 1 to 15."),
    (
        MusicForm,
        SONG,
        "generation_type",
        "karaoke",
        "Tracks: choose Song (vocals and music), Music only, Vocals only or Separate tracks.",
    ),
    (MusicForm, SONG, "lyrics", "l" * 6001, "Lyrics: at most 6000 characters (this has 6001)."),
    (MeshForm, MESH, "steps", "1", "Shape steps: 5 to 100."),
    (MeshForm, MESH, "target_faces", "10", "Faces after simplifying: 1000 to 500000."),
    (MeshForm, MESH, "image", None, "A picture is required (PNG, JPEG or WebP)."),
    (TiinyImageForm, IMAGE, "n", "9", "How many: 1 to 8."),
    (TiinyImageForm, IMAGE, "width", "4096", "Width: 256 to 2048 pixels, a multiple of 16."),
    (TiinyImageForm, IMAGE, "steps", "0", "Steps: 1 to 100."),
    (TiinyImageForm, IMAGE, "prompt", "", "A prompt is required: what should it show?"),
    (SpeechForm, PRESET, "response_format", "ogg", "Format: choose WAV or MP3."),
    (SpeechForm, PRESET, "language", "x" * 21, "Language: at most 20 characters (this has 21)."),
    (SpeechForm, PRESET, "input", "", "The text to speak is required."),
]
TS_CASES = [
    (TensorSharpVideoForm, "h3.gguf", "frames", "999", "Frames: 1 to 481."),
    (TensorSharpVideoForm, "h3.gguf", "ts_steps", "0", "Steps: 1 to 100."),
    (TensorSharpVideoForm, "h3.gguf", "width", "4096", "Width: 32 to 2048 pixels, a multiple of 32."),
    (
        TensorSharpVideoForm,
        "h3.gguf",
        "video_mode",
        "fl2v",
        "Mode: choose Text to video or Start image to video.",
    ),
    (
        TensorSharpVideoForm,
        "h3.gguf",
        "cfg",
        "30",
        "This model is CFG-distilled: guidance above 1 is refused.",
    ),
    (TensorSharpEditForm, "qwen-edit.gguf", "cfg", "30", "Guidance (cfg): 0 to 20."),
    (TensorSharpEditForm, "qwen-edit.gguf", "image", None, "A picture is required (PNG, JPEG or WebP)."),
]


def _case(form_class, model, field, value):
    data = {"model": model, "prompt": "p", "input": "hello", "caption": "c", "seconds": "2"}
    if value is not None:
        data[field] = value
    else:
        data.pop(field, None)
    return data


@pytest.mark.parametrize(("form_class", "model", "field", "value", "message"), CASES)
def test_tiiny_form_messages_name_the_allowed_values(
    pocket, member, form_class, model, field, value, message
):
    errors = errors_of(form_class, pocket, member, _case(form_class, model, field, value))
    assert any(m.startswith(message) for m in errors.get(field, [])), errors


@pytest.mark.parametrize(("form_class", "model", "field", "value", "message"), TS_CASES)
def test_tensorsharp_form_messages_name_the_allowed_values(
    server, member, form_class, model, field, value, message
):
    errors = errors_of(form_class, server, member, _case(form_class, model, field, value))
    assert any(m.startswith(message) for m in errors.get(field, [])), errors


def _bad_values(field) -> list:
    from django import forms

    if isinstance(field, (forms.IntegerField, forms.FloatField)):
        lo, hi = field.min_value, field.max_value
        return ["abc", *([lo - 1] if lo is not None else []), *([hi + 1] if hi is not None else []), ""]
    if isinstance(field, forms.ChoiceField):
        return ["not-a-choice", ""]
    if isinstance(field, forms.DateTimeField):
        return ["tomorrowish"]
    if isinstance(field, forms.CharField):
        return ["", *(["x" * (field.max_length + 1)] if field.max_length else [])]
    return [""]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.device_kind}-{s.kind}")
def test_no_form_field_shows_a_generic_django_message(pocket, server, member, spec):
    """Every field of every form, fed wrong values one at a time: each message names what would do."""
    device = pocket if spec.device_kind == "tiiny" else server
    probe = spec.form(device=device, user=member)
    models = [c for c, _ in probe.fields["model"].choices]
    assert models
    seen = 0
    for model in models:
        for name, field in spec.form(data={"model": model}, device=device, user=member).fields.items():
            for bad in _bad_values(field):
                data = {"model": model, "when": "asap", name: bad}
                if name == "when":
                    data = {"model": model, name: bad}
                form = spec.form(data, {}, device=device, user=member)
                form.is_valid()
                for field_name, messages in form.errors.items():
                    for m in messages:
                        seen += 1
                        assert not any(g in m for g in GENERIC), (
                            f"{spec.form.__name__}.{field_name}={bad!r}: {m}"
                        )
    assert seen > 20  # the sweep did meet errors


def test_music_length_bounds_follow_the_model(pocket, member):
    loop = MusicForm({"model": LOOP}, device=pocket, user=member).fields["seconds"]
    song = MusicForm({"model": SONG}, device=pocket, user=member).fields["seconds"]
    assert (loop.widget.attrs["max"], song.widget.attrs["max"]) == (47, 240)
    assert (loop.widget.attrs["min"], song.widget.attrs["min"]) == (1, 10)
    ok = MusicForm(
        {"model": SONG, "caption": "a ballad", "seconds": "200", "when": "asap"}, device=pocket, user=member
    )
    assert ok.is_valid(), ok.errors


# -- the submit page ---------------------------------------------------------------------------------------------
def music_post(device, **over) -> dict:
    data = {"device": device.pk, "kind": "music", "model": SONG, "when": "asap", "polite": "on"}
    data.update(over)
    return data


def test_a_refused_song_comes_back_with_what_was_typed_and_without_the_loop_fields(member_client, pocket):
    data = music_post(
        pocket, caption="a slow ballad about kites", lyrics="[verse]\nup we go", seconds="300",
        generation_type="bgm", seed="42", submit_token="t" * 24,
    )  # fmt: skip
    response = member_client.post("/jobs/new/", data)
    html = response.content.decode()
    assert response.status_code == 400 and Job.objects.count() == 0
    assert 'value="a slow ballad about kites"' in html and "[verse]\nup we go</textarea>" in html
    assert 'value="300"' in html and 'value="42"' in html and '<option value="bgm" selected>' in html
    assert 'name="prompt"' not in html and 'name="cfg_scale"' not in html  # Foundation-1's fields
    assert "SongGeneration makes songs of 10 to 240 seconds." in html
    assert f'value="{"t" * 24}"' in html  # the same token: nothing was queued under it
    assert re.search(
        r'<button type="submit" id="job-submit" disabled aria-describedby="job-submit-why">', html
    )
    assert "Can't queue yet: SongGeneration makes songs of 10 to 240 seconds." in html


def test_choosing_songgeneration_brings_the_song_fields(member_client, pocket):
    data = music_post(pocket, fields_for=LOOP, prompt="drums", seconds="20")
    html = member_client.post("/jobs/new/admission/", data, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="job-fields" class="job-fields" hx-swap-oob="true"' in html
    fields = html[html.index('id="job-fields"') :]
    assert 'name="caption"' in fields and 'name="lyrics"' in fields and 'name="generation_type"' in fields
    assert 'name="prompt"' not in fields and 'name="steps"' not in fields
    assert f'name="fields_for" value="{SONG}"' in fields
    assert 'name="model"' not in fields  # the select stays where it is (and keeps its focus)
    # Back to Foundation-1: its fields again.
    back = member_client.post(
        "/jobs/new/admission/", music_post(pocket, model=LOOP, fields_for=SONG), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'name="prompt"' in back and 'name="lyrics"' not in back


def test_typing_in_the_same_model_sends_no_fields(member_client, pocket):
    data = music_post(pocket, fields_for=SONG, caption="a ballad", seconds="30")
    html = member_client.post("/jobs/new/admission/", data, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="job-fields"' not in html and 'id="admission"' in html


def test_speech_fields_follow_the_voice_mode(member_client, pocket):
    def fields(model: str) -> str:
        data = {"device": pocket.pk, "kind": "speech", "model": model, "fields_for": PRESET, "input": "hi"}
        html = member_client.post("/jobs/new/admission/", data, HTTP_HX_REQUEST="true").content.decode()
        return html[html.index('id="job-fields"') :]

    design, clone = fields(DESIGN), fields(CLONE)
    assert 'name="instruct"' in design and 'name="ref_audio"' not in design
    assert 'name="ref_audio"' in clone and 'name="ref_text"' in clone and 'name="instruct"' not in clone


def test_video_sizes_and_steps_follow_the_model(member_client, pocket):
    data = {"device": pocket.pk, "kind": "video", "model": WAN, "fields_for": VIDEO, "prompt": "a fox"}
    html = member_client.post("/jobs/new/admission/", data, HTTP_HX_REQUEST="true").content.decode()
    fields = html[html.index('id="job-fields"') :]
    assert 'value="1280x704"' in fields and 'value="832x480"' not in fields
    assert '<option value="30" selected>' in fields and 'max="5"' in fields


def test_the_button_is_disabled_while_a_refusal_stands(member_client, pocket):
    def actions(**over) -> str:
        html = member_client.post(
            "/jobs/new/admission/", music_post(pocket, fields_for=SONG, caption="a ballad", **over),
            HTTP_HX_REQUEST="true",
        ).content.decode()  # fmt: skip
        return html[html.index('id="job-form-actions"') - 30 :]

    refused = actions(seconds="300")
    assert 'hx-swap-oob="true"' in refused.split(">", 1)[0]
    assert "disabled" in refused.split("</button>")[0]
    assert "Can't queue yet: SongGeneration makes songs of 10 to 240 seconds." in refused
    fixed = actions(seconds="30")
    assert "disabled" not in fixed.split("</button>")[0] and "Can't queue yet" not in fixed
    # An empty field isn't a refusal: the summary asks for it and the button stays usable.
    empty = actions(seconds="")
    assert "disabled" not in empty.split("</button>")[0]


def test_the_button_is_disabled_for_a_render_the_device_would_cut_off(member_client, pocket):
    data = {
        "device": pocket.pk, "kind": "video", "model": VIDEO, "fields_for": VIDEO, "prompt": "a fox",
        "size": "1344x768", "seconds": "7", "steps": "8", "when": "asap",
    }  # fmt: skip
    html = member_client.post("/jobs/new/admission/", data, HTTP_HX_REQUEST="true").content.decode()
    assert "Too long for the device" in html
    assert re.search(r'id="job-submit" disabled aria-describedby="job-submit-why"', html)
    assert "Can't queue yet: This render would take about" in html


def test_run_again_keeps_its_button_label_in_the_swap(member_client, pocket):
    data = music_post(pocket, fields_for=SONG, caption="a ballad", seconds="30", again="1")
    html = member_client.post("/jobs/new/admission/", data, HTTP_HX_REQUEST="true").content.decode()
    assert "Queue it again" in html


def mesh_post(device, token: str, **over) -> dict:
    data = {
        "device": device.pk,
        "kind": "mesh",
        "model": MESH,
        "when": "asap",
        "simplify": "on",
        "submit_token": token,
    }
    data.update(over)
    return data


def test_a_refused_try_keeps_the_picture_for_the_next(member_client, member, pocket, media):
    token = "keep-" + "k" * 20
    first = member_client.post(
        "/jobs/new/",
        mesh_post(pocket, token, steps="1", image=SimpleUploadedFile("kite.png", PNG, "image/png")),
    )
    html = first.content.decode()
    assert first.status_code == 400 and "Shape steps: 5 to 100." in html
    assert "Keeping <strong>kite.png</strong>" in html
    assert re.search(
        r'<input type="file" name="image" id="id_image" accept="[^"]+" data-preview="preview-image"\s+aria',
        html,
    )
    # The next try sends no file: the kept one is used, then forgotten.
    second = member_client.post("/jobs/new/", mesh_post(pocket, token, steps="30"))
    assert second.status_code == 302, second.content.decode()[:2000]
    job = Job.objects.get()
    assert job.owner == member and job.params["files"]["image"].endswith(".png")
    assert not list((media / "stash").rglob("*.bin"))


def test_a_kept_picture_is_only_its_owners(member_client, other_client, pocket, media):
    token = "mine-" + "m" * 20
    member_client.post(
        "/jobs/new/",
        mesh_post(pocket, token, steps="1", image=SimpleUploadedFile("kite.png", PNG, "image/png")),
    )
    theirs = other_client.post("/jobs/new/", mesh_post(pocket, token, steps="30"))
    html = theirs.content.decode()
    assert theirs.status_code == 400 and "kite.png" not in html and Job.objects.count() == 0
    assert "A picture is required (PNG, JPEG or WebP)." in html


def test_a_kept_picture_can_be_dropped(member_client, pocket, media):
    token = "drop-" + "d" * 20
    member_client.post(
        "/jobs/new/",
        mesh_post(pocket, token, steps="1", image=SimpleUploadedFile("kite.png", PNG, "image/png")),
    )
    again = member_client.post("/jobs/new/", mesh_post(pocket, token, steps="30", unstash="image"))
    assert again.status_code == 400 and "kite.png" not in again.content.decode() and Job.objects.count() == 0


def test_a_file_that_fails_its_checks_must_be_chosen_again(member_client, pocket, media):
    token = "bad-" + "b" * 20
    response = member_client.post(
        "/jobs/new/",
        mesh_post(pocket, token, image=SimpleUploadedFile("kite.png", b"not a png", "image/png")),
    )
    html = response.content.decode()
    assert response.status_code == 400 and "The picture must be a PNG, JPEG or WebP image" in html
    assert "Choose the file again" in html and "Keeping" not in html


def test_a_voice_recording_survives_the_swap_to_another_model(member_client, pocket, media):
    """Choosing a model re-renders the fields (file inputs empty): the chosen recording stays on the server."""
    token = "swap-" + "s" * 20
    data = {
        "device": pocket.pk, "kind": "speech", "model": CLONE, "fields_for": PRESET, "input": "hello",
        "submit_token": token, "ref_audio": SimpleUploadedFile("me.wav", WAV, "audio/wav"),
    }  # fmt: skip
    html = member_client.post("/jobs/new/admission/", data, HTTP_HX_REQUEST="true").content.decode()
    assert "Keeping <strong>me.wav</strong>" in html
    submit = {
        **data,
        "ref_text": "hello there",
        "when": "asap",
        "fields_for": CLONE,
        "response_format": "wav",
    }
    submit.pop("ref_audio")
    response = member_client.post("/jobs/new/", submit)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Job.objects.get().params["files"]["ref_audio"].endswith(".wav")


def test_run_again_swaps_in_fields_that_reuse_the_original_file(member_client, pocket):
    data = {
        "device": pocket.pk,
        "kind": "speech",
        "model": CLONE,
        "fields_for": PRESET,
        "input": "hi",
        "again": "7",
    }
    html = member_client.post("/jobs/new/admission/", data, HTTP_HX_REQUEST="true").content.decode()
    fields = html[html.index('id="job-fields"') :]
    assert "Uses the same file as the original job." in fields and 'type="file"' not in fields
