"""Submit-time checks against the device's capabilities: nothing reaches the device that it would reject."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from devices.capabilities import Capabilities, ModelCap, TensorSharpCap, reference_video_cap
from devices.models import Device
from jobs.kinds.forms import (
    MeshForm,
    MusicForm,
    SpeechForm,
    TensorSharpVideoForm,
    TiinyVideoForm,
    snap_frames,
)
from jobs.kinds.table import form_class_for
from jobs.queue.admission import form_admission
from jobs.tests.ui_fixtures import PNG  # a real 1x1 PNG: uploads are decoded

pytestmark = pytest.mark.django_db
V = "MiniMaxAI/MiniMax-H3-Turbo"


@pytest.fixture
def pocket():
    caps = Capabilities(
        kind="tiiny",
        models=[
            ModelCap(V, "MiniMax-H3-Turbo", "video", npu_usage=45),
            ModelCap("tencent/Hunyuan3D-2.1", "Hunyuan3D", "3d", npu_usage=30),
            ModelCap("RoyalCities/Foundation-1", "Foundation-1", "music", npu_usage=5),
            ModelCap("tencent/SongGeneration-v2-large", "SongGeneration", "song", npu_usage=28),
            ModelCap("Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice", "CustomVoice", "tts", npu_usage=7),
            ModelCap("Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign", "VoiceDesign", "tts", npu_usage=5),
            ModelCap("Supertone/supertonic-3", "supertonic-3", "tts", npu_usage=0),
        ],
        video={V: reference_video_cap(V)},
        stages_3d=["shape", "simplify", "texture", "export"],
    )
    return Device.objects.create(name="p", base_url="http://127.0.0.1:1", capabilities=caps.to_dict())


@pytest.fixture
def ts_device():
    caps = Capabilities(
        kind="tensorsharp",
        models=[ModelCap("h3.gguf", "h3.gguf", "video", loaded=True)],
        tensorsharp=TensorSharpCap(
            architecture="minimax-h3",
            loaded="h3.gguf",
            frame_grid="17k+5",
            fps=24,
            max_cfg=1.0,
            video={
                "family": "minimax-h3",
                "supportsAudio": True,
                "supportsImageConditioning": True,
                "supportsEndImageConditioning": False,
            },
        ),
    )
    return Device.objects.create(
        name="t", kind="tensorsharp", base_url="http://127.0.0.1:2", capabilities=caps.to_dict()
    )


def video(device, member, **data):
    base = {
        "model": V,
        "prompt": "fox",
        "size": "832x480",
        "seconds": 2,
        "steps": 4,
        "when": "asap",
        "polite": "on",
    }
    return TiinyVideoForm({**base, **data}, device=device, user=member)


def test_it_accepts_a_good_tiiny_video_and_estimates_it(pocket, member):
    form = video(pocket, member)
    assert form.is_valid(), form.errors
    assert form.cleaned_params() == {"prompt": "fox", "size": "832x480", "seconds": 2, "steps": 4}
    adm = form_admission(form)
    assert adm.refused is None and 400 < adm.estimate_s < 440
    assert adm.ready_at > adm.starts_at


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("size", "640x640", "This model only renders 1344x768, 768x1344, 832x480"),
        ("seconds", 8, "The device renders 1 to 7 seconds"),
        ("steps", 3, "Steps must be one of"),
    ],
)
def test_it_refuses_what_the_device_would_reject(pocket, member, field, value, message):
    form = video(pocket, member, **{field: value})
    assert not form.is_valid()
    assert message in str(form.errors[field])


def test_it_refuses_renders_over_55_minutes(pocket, member):
    form = video(pocket, member, size="1344x768", seconds=7, steps=8)
    assert form.is_valid(), form.errors
    refused = form_admission(form).refused
    assert refused and "55 minutes" in refused


def test_it_checks_tensorsharp_video_rules(ts_device, member):
    form = TensorSharpVideoForm(
        {
            "model": "h3.gguf",
            "prompt": "p",
            "width": 650,
            "height": 384,
            "frames": 25,
            "ts_steps": 8,
            "cfg": 2.0,
            "video_mode": "t2v",
            "when": "asap",
        },
        device=ts_device,
        user=member,
    )
    assert not form.is_valid()
    assert "multiple of 32" in str(form.errors["width"])
    assert "CFG-distilled" in str(form.errors["cfg"])
    assert "end_image" not in form.fields  # this checkpoint has no end-image conditioning
    ok = TensorSharpVideoForm(
        {
            "model": "h3.gguf",
            "prompt": "p",
            "width": 640,
            "height": 384,
            "frames": 25,
            "ts_steps": 8,
            "video_mode": "t2v",
            "when": "asap",
        },
        device=ts_device,
        user=member,
    )
    assert ok.is_valid(), ok.errors
    assert ok.cleaned_params()["frames"] == 22  # snapped to 17k+5
    assert snap_frames(48, "4k+1") == 49


def test_it_never_offers_background_and_bounds_the_image(pocket, member):
    form = MeshForm(
        {"model": "tencent/Hunyuan3D-2.1", "simplify": "on", "when": "asap"},
        {"image": SimpleUploadedFile("x.png", PNG, "image/png")},
        device=pocket,
        user=member,
    )
    assert form.is_valid(), form.errors
    assert form.cleaned_params()["stages"] == ["shape", "simplify", "export"]
    bad = MeshForm(
        {"model": "tencent/Hunyuan3D-2.1", "when": "asap"},
        {"image": SimpleUploadedFile("x.png", b"GIF89a....", "image/png")},
        device=pocket,
        user=member,
    )
    assert not bad.is_valid() and "PNG, JPEG or WebP" in str(bad.errors["image"])


def test_it_validates_music_per_model(pocket, member):
    loop = MusicForm(
        {"model": "RoyalCities/Foundation-1", "prompt": "bass", "seconds": 60, "when": "asap"},
        device=pocket,
        user=member,
    )
    assert not loop.is_valid() and "1 to 47" in str(loop.errors["seconds"])
    song = MusicForm(
        {
            "model": "tencent/SongGeneration-v2-large",
            "caption": "folk",
            "seconds": 30,
            "generation_type": "mixed",
            "when": "asap",
        },
        device=pocket,
        user=member,
    )
    assert song.is_valid(), song.errors
    assert song.cleaned_params()["preview_seconds"] == 10


def test_it_offers_only_the_models_own_voices_and_never_supertonic(pocket, member):
    form = SpeechForm(
        {
            "model": "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
            "input": "hi",
            "voice": "alloy",
            "response_format": "wav",
            "when": "asap",
        },
        device=pocket,
        user=member,
    )
    assert not form.is_valid() and "serena" in str(form.errors["voice"])
    assert "Supertone/supertonic-3" not in dict(form.fields["model"].choices)
    st = SpeechForm(
        {"model": "Supertone/supertonic-3", "input": "hi", "response_format": "wav", "when": "asap"},
        device=pocket,
        user=member,
    )
    assert not st.is_valid() and "full id" in str(st.errors["model"])
    design = SpeechForm(
        {
            "model": "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign",
            "input": "hi",
            "response_format": "wav",
            "when": "asap",
        },
        device=pocket,
        user=member,
    )
    assert not design.is_valid() and "Describe" in str(design.errors["instruct"])


def test_it_needs_a_time_for_not_before(pocket, member):
    form = video(pocket, member, when="not_before")
    assert not form.is_valid() and "not_before" in form.errors
    assert form_class_for(pocket.kind, "video") is TiinyVideoForm


def test_fields_from_params_is_the_inverse_of_cleaned_params(ts_device, pocket, member):
    """What "run again" fills in (page and API) must come back as the same parameters."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    ts = {"prompt": "p", "width": 640, "height": 384, "frames": 22, "steps": 8, "video_mode": "t2v"}
    data = {**TensorSharpVideoForm.fields_from_params(ts), "model": "h3.gguf", "when": "asap"}
    form = TensorSharpVideoForm(data, device=ts_device, user=member)
    assert form.is_valid(), form.errors
    assert {k: form.cleaned_params()[k] for k in ts} == ts
    mesh = {"stages": ["shape", "texture", "export"], "format": "glb", "steps": 30}
    data = {**MeshForm.fields_from_params(mesh), "model": "tencent/Hunyuan3D-2.1", "when": "asap"}
    form = MeshForm(data, {"image": SimpleUploadedFile("a.png", PNG)}, device=pocket, user=member)
    form.is_valid()
    assert form.stages() == mesh["stages"]
