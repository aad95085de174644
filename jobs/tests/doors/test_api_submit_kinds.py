"""POST /api/jobs for every (device kind, job kind) pair, JSON or multipart as each needs, and each pair's
own fields: what one device kind takes is refused by name on the other."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from devices.capabilities import Capabilities, ModelCap, TensorSharpCap
from devices.models import Device
from hub.accounts.tokens import token_create
from jobs.kinds.table import SPECS
from jobs.models import Job
from jobs.tests.ui_fixtures import IMAGE, MESH, MUSIC, PNG, TTS, VIDEO

pytestmark = pytest.mark.django_db
EDIT = "Qwen/Qwen-Image-Edit"


@pytest.fixture(autouse=True)
def _fresh_rate_counters(redis_client):
    for key in redis_client.scan_iter("*ratelimit:submit:*"):
        redis_client.delete(key)


@pytest.fixture
def script(member) -> Client:
    _, raw = token_create(user=member, name="script", scopes=["read", "submit"])
    return Client(headers={"Authorization": f"Bearer {raw}"})


@pytest.fixture
def ts(db):
    caps = Capabilities(
        kind="tensorsharp",
        models=[
            ModelCap("h3.gguf", "h3.gguf", "video", loaded=True),
            ModelCap(EDIT, "Qwen-Image-Edit", "image_edit", loaded=True),
        ],
        tensorsharp=TensorSharpCap(
            architecture="minimax-h3",
            loaded="h3.gguf",
            frame_grid="17k+5",
            fps=24,
            max_cfg=1.0,
            video={"family": "minimax-h3", "supportsAudio": True, "supportsImageConditioning": True},
        ),
    )
    return Device.objects.create(
        name="TS",
        kind="tensorsharp",
        base_url="http://127.0.0.1:2",
        state="online",
        capabilities=caps.to_dict(),
    )


def png(name: str = "in.png") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, PNG, "image/png")


CASES = {
    ("tiiny", "video"): ({"model": VIDEO, "prompt": "fox", "size": "832x480", "seconds": 2, "steps": 4}, {}),
    ("tiiny", "mesh"): ({"model": MESH, "simplify": True, "texture": True}, {"image": png}),
    ("tiiny", "music"): ({"model": MUSIC, "prompt": "a calm loop, 90 bpm", "seconds": 8}, {}),
    ("tiiny", "image"): ({"model": IMAGE, "prompt": "a kite", "width": 512, "height": 512, "n": 2}, {}),
    ("tiiny", "speech"): ({"model": TTS, "input": "Dinner is ready.", "voice": "serena"}, {}),
    ("tensorsharp", "video"): (
        {"model": "h3.gguf", "prompt": "fox", "width": 640, "height": 384, "frames": 22, "ts_steps": 8,
         "video_mode": "i2v"},
        {"start_image": png},
    ),
    ("tensorsharp", "image"): ({"model": EDIT, "prompt": "make it blue"}, {"image": png}),
}  # fmt: skip


def test_every_pair_of_the_registry_has_a_case():
    assert set(CASES) == {(s.device_kind, str(s.kind)) for s in SPECS}


@pytest.mark.parametrize("pair", list(CASES), ids=lambda p: f"{p[0]}-{p[1]}")
def test_every_kind_on_every_device_kind_can_be_submitted(script, device, ts, media, pair):
    device_kind, kind = pair
    target = device if device_kind == "tiiny" else ts
    fields, files = CASES[pair]
    if files:  # multipart: the fields as a form would send them
        data = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in fields.items()}
        data.update({"device": str(target.pk), "kind": kind, **{k: make() for k, make in files.items()}})
        response = script.post("/api/jobs", data)
    else:
        body = {"device": target.pk, "kind": kind, **fields}
        response = script.post("/api/jobs", json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.device, job.kind, job.model_id) == (target, kind, fields["model"])
    if files:
        assert set(job.params["files"]) == set(files)


def test_a_tiiny_field_on_a_tensorsharp_video_is_refused_by_name(script, ts):
    body = {"device": ts.pk, "kind": "video", "model": "h3.gguf", "prompt": "fox", "size": "832x480"}
    response = script.post("/api/jobs", json.dumps(body), content_type="application/json")
    assert response.status_code == 422
    assert "ts_steps" in response.json()["errors"]["size"][0]  # it lists the fields this pair takes


def test_a_kind_the_device_cannot_run_is_refused_on_kind(script, ts):
    body = {"device": ts.pk, "kind": "music", "model": MUSIC, "prompt": "x", "seconds": 8}
    response = script.post("/api/jobs", json.dumps(body), content_type="application/json")
    assert response.status_code == 422 and "music" in response.json()["errors"]["kind"][0]


def test_a_file_that_is_not_an_image_gets_the_forms_message(script, device, media):
    data = {"device": str(device.pk), "kind": "mesh", "model": MESH}
    data["image"] = SimpleUploadedFile("x.png", b"GIF89a not really", "image/png")
    response = script.post("/api/jobs", data)
    assert response.status_code == 422
    assert response.json()["errors"]["image"] == ["The picture must be a PNG, JPEG or WebP image."]
    missing = script.post("/api/jobs", {"device": str(device.pk), "kind": "mesh", "model": MESH})
    assert missing.status_code == 422 and "image" in missing.json()["errors"]
    wrong = script.post(
        "/api/jobs", {"device": str(device.pk), "kind": "music", "model": MUSIC, "image": png()}
    )
    assert wrong.status_code == 422 and "takes no file" in wrong.json()["errors"]["image"][0]
    assert Job.objects.count() == 0


def test_a_voice_the_model_lacks_lists_the_valid_ones(script, device):
    body = {"device": device.pk, "kind": "speech", "model": TTS, "input": "hi", "voice": "darth"}
    response = script.post("/api/jobs", json.dumps(body), content_type="application/json")
    assert response.status_code == 422 and "serena" in response.json()["errors"]["voice"][0]


def test_fields_left_out_take_the_forms_defaults_as_the_page_prefills_them(script, device, media):
    data = {"device": str(device.pk), "kind": "mesh", "model": MESH, "image": png()}
    assert script.post("/api/jobs", data).status_code == 201
    job = Job.objects.get()
    assert job.params["stages"] == ["shape", "simplify", "texture", "export"]  # both ticked on the page
    assert job.polite is True and job.shared is False and job.when == "asap"
    body = {"device": device.pk, "kind": "speech", "model": TTS, "input": "hi"}
    response = script.post("/api/jobs", json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content
    assert response.json()["params"]["response_format"] == "wav"
    assert response.json()["params"]["voice"] == "aiden"  # the model's first voice, as on the page
