"""Presets through REST (/api/presets, "preset" in POST /api/jobs) and /v1 (extra_body): real tokens, the whole
Django stack; the same service as the pages (``jobs.queue.presets``)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from hub.accounts.tokens import token_create
from jobs.models import Job, Preset
from jobs.queue.presets import preset_create
from jobs.tests.ui_fixtures import VIDEO

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_rate_limit(settings):
    settings.HUB_API_SUBMIT_RATE = "0"


def token_client(user, scopes=("read", "submit")) -> Client:
    _, raw = token_create(user=user, name="script", scopes=list(scopes))
    return Client(headers={"Authorization": f"Bearer {raw}"})


def post_json(client: Client, url: str, body) -> object:
    return client.post(url, json.dumps(body), content_type="application/json")


def patch_json(client: Client, url: str, body) -> object:
    return client.patch(url, json.dumps(body), content_type="application/json")


@pytest.fixture
def night(member):
    return preset_create(
        by=member, kind="video", name="night", values={"model": VIDEO, "size": "480x832", "steps": 5}
    )


# -- CRUD -------------------------------------------------------------------------------------------------------


def test_create_list_get_rename_and_delete(member):
    api = token_client(member)
    made = post_json(api, "/api/presets", {"name": "Fast", "kind": "video", "values": {"steps": 4}})
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["name"] == "Fast" and body["values"] == {"steps": 4}
    assert body["household"] is False and body["may_change"] is True
    url = f"/api/presets/{body['id']}"
    assert [p["name"] for p in api.get("/api/presets?kind=video").json()["items"]] == ["Fast"]
    assert api.get("/api/presets?kind=image").json()["items"] == []
    assert api.get(url).json()["values"] == {"steps": 4}
    renamed = patch_json(api, url, {"name": "Quick", "values": {"steps": 6}})
    assert renamed.status_code == 200 and renamed.json()["name"] == "Quick"
    assert Preset.objects.get().values == {"steps": 6}
    assert api.delete(url).status_code == 204
    assert not Preset.objects.exists()


def test_bad_values_are_a_422_naming_the_field(member):
    api = token_client(member)
    response = post_json(
        api, "/api/presets", {"name": "x", "kind": "image", "values": {"width": 9, "glitter": True}}
    )
    assert response.status_code == 422
    assert set(response.json()["errors"]) == {"width", "glitter"}
    again = post_json(api, "/api/presets", {"name": "x", "kind": "image", "values": {}})
    assert again.status_code == 201
    clash = post_json(api, "/api/presets", {"name": "x", "kind": "image", "values": {}})
    assert clash.status_code == 422 and "name" in clash.json()["errors"]


def test_another_members_presets_do_not_leak(member, other_member, device, night):
    api = token_client(other_member)
    assert api.get("/api/presets").json()["items"] == []
    url = f"/api/presets/{night.pk}"
    for response in (api.get(url), patch_json(api, url, {"name": "mine"}), api.delete(url)):
        assert response.status_code == 404
        assert "night" not in response.content.decode()
    assert api.get("/api/presets/export").json()["presets"] == []
    # Nor through a submit: his "night" is exactly like a missing one.
    response = post_json(api, "/api/jobs", {"kind": "video", "prompt": "a fox", "preset": "night"})
    assert response.status_code == 422 and list(response.json()["errors"]) == ["preset"]
    assert Preset.objects.get().name == "night"


def test_members_cannot_make_or_change_the_households(member, admin_user):
    assert (
        post_json(
            token_client(member), "/api/presets", {"name": "h", "kind": "video", "household": True}
        ).status_code
        == 403
    )
    admin = token_client(admin_user)
    house = post_json(admin, "/api/presets", {"name": "h", "kind": "video", "household": True}).json()
    assert house["household"] is True
    api = token_client(member)
    url = f"/api/presets/{house['id']}"
    seen = api.get(url).json()
    assert seen["household"] is True and seen["may_change"] is False
    assert patch_json(api, url, {"name": "mine"}).status_code == 403
    assert api.delete(url).status_code == 403
    assert token_client(member, scopes=("read",)).delete(url).status_code == 403
    assert Preset.objects.get().name == "h"


def test_export_then_import_round_trips_and_a_bad_import_imports_nothing(member, other_member, night):
    exported = token_client(member).get("/api/presets/export")
    assert exported.status_code == 200
    payload = exported.json()
    api = token_client(other_member)
    bad = {**payload, "presets": [*payload["presets"], {"name": "x", "kind": "video", "values": {"zoom": 2}}]}
    refused = post_json(api, "/api/presets/import", bad)
    assert refused.status_code == 422 and "presets[1].values.zoom" in refused.json()["errors"]
    assert not Preset.objects.filter(owner=other_member).exists()
    imported = post_json(api, "/api/presets/import", payload)
    assert imported.status_code == 201, imported.content
    mine = Preset.objects.get(owner=other_member)
    assert (mine.name, mine.kind, mine.values) == ("night", "video", night.values)


# -- submit with a preset ---------------------------------------------------------------------------------------


def test_a_submit_takes_the_presets_values_as_defaults_and_the_bodys_fields_win(member, device, night):
    api = token_client(member)
    body = {"device": device.pk, "kind": "video", "prompt": "a fox", "preset": "night"}
    response = post_json(api, "/api/jobs", body)
    assert response.status_code == 201, response.content
    job = Job.objects.get()
    assert (job.model_id, job.params["size"], job.params["steps"]) == (VIDEO, "480x832", 5)
    response = post_json(api, "/api/jobs", {**body, "steps": 7, "device": "any"})
    assert response.status_code == 201, response.content
    assert (
        Job.objects.latest("pk").params["steps"] == 7 and Job.objects.latest("pk").params["size"] == "480x832"
    )


def test_an_unknown_preset_is_a_422_naming_preset(member, device):
    response = post_json(
        token_client(member),
        "/api/jobs",
        {"device": device.pk, "kind": "video", "prompt": "x", "preset": "nope"},
    )
    assert response.status_code == 422
    assert list(response.json()["errors"]) == ["preset"]
    assert "nope" in response.json()["errors"]["preset"][0]
    assert not Job.objects.exists()


def test_a_preset_whose_size_the_device_lacks_gets_the_usual_refusal(member, device):
    preset_create(by=member, kind="video", name="square", values={"size": "640x640"})
    response = post_json(
        token_client(member),
        "/api/jobs",
        {"device": device.pk, "kind": "video", "prompt": "x", "model": VIDEO, "preset": "square"},
    )
    assert response.status_code == 422
    errors = response.json()["errors"]
    assert list(errors) == ["size"] and "640x640" in errors["size"][0]


def test_v1_takes_a_preset_through_extra_body(member, other_member, device, night):
    from jobs.tests.doors.test_v1 import api, error_of

    client = api(member)
    # What extra_body={"preset": "night"} sends: the field in the body; the model comes from the preset.
    response = client.post("/v1/videos", {"prompt": "a fox", "preset": "night"})
    assert response.status_code == 200, response.content
    job = Job.objects.get()
    assert (job.model_id, job.params["size"], job.params["steps"]) == (VIDEO, "480x832", 5)
    response = client.post("/v1/videos", {"prompt": "a fox", "preset": "night", "size": "832x480"})
    assert Job.objects.latest("pk").params["size"] == "832x480"  # the request's own field wins
    err = error_of(api(other_member).post("/v1/videos", {"prompt": "a fox", "preset": "night"}), 400)
    assert err["param"] == "preset" and err["code"] == "preset_not_found"


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/v1/images/generations", {"prompt": "a fox", "preset": "nope"}),
        ("/v1/audio/speech", {"input": "hello", "voice": "serena", "preset": "nope"}),
    ],
)
def test_v1_images_and_speech_name_an_unknown_preset(member, device, url, body):
    from jobs.tests.doors.test_v1 import api, error_of

    response = api(member).post(url, json.dumps(body), content_type="application/json")
    err = error_of(response, 400)
    assert err["param"] == "preset" and err["code"] == "preset_not_found"
    assert not Job.objects.exists()


def test_v1_images_take_a_presets_canvas_steps_and_model(member, device):
    from django.test import RequestFactory

    from jobs.doors.v1.images import _image_request
    from jobs.tests.ui_fixtures import IMAGE

    preset_create(
        by=member,
        kind="image",
        name="poster",
        values={"model": IMAGE, "width": 768, "height": 1024, "steps": 6},
    )
    body = {"prompt": "a fox", "preset": "poster", "device": str(device.pk)}
    request = RequestFactory().post(
        "/v1/images/generations", json.dumps(body), content_type="application/json"
    )
    request.user = member
    named, build, extra = _image_request(request)
    form, _files = build(named)
    assert extra["size"] == "768x1024"
    assert (form["model"], form["width"], form["height"], form["steps"]) == (IMAGE, 768, 1024, 6)
