"""Preset pages: the Presets page, "Save as preset" and the picker on the new-job form, rename, delete, export and
import (``jobs.doors.preset_views``), all through the same service as REST (``jobs.queue.presets``)."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from jobs.models import Job, Preset
from jobs.queue.presets import preset_create
from jobs.tests.doors.test_views_new import video_post
from jobs.tests.ui_fixtures import VIDEO

pytestmark = pytest.mark.django_db


@pytest.fixture
def night(member):
    return preset_create(
        by=member,
        kind="video",
        name="night",
        values={"model": VIDEO, "size": "480x832", "steps": 5, "seconds": 3},
    )


def test_the_page_says_when_there_are_none(member_client):
    html = member_client.get("/jobs/presets/").content.decode()
    assert 'id="presets-empty"' in html and 'id="household-empty"' in html
    assert 'href="/jobs/presets/"' in html  # in the navigation


def test_the_page_lists_ones_own_and_the_households_never_anothers(
    member_client, other_client, admin_user, night
):
    preset_create(by=admin_user, kind="image", name="house look", values={"steps": 8}, household=True)
    html = member_client.get("/jobs/presets/").content.decode()
    assert "night" in html and "house look" in html
    assert f'action="/jobs/presets/{night.pk}/rename/"' in html
    other = other_client.get("/jobs/presets/").content.decode()
    assert "night" not in other and "house look" in other
    assert "/rename/" not in other  # the household's are the admins' to change
    assert other_client.post(f"/jobs/presets/{night.pk}/rename/", {"name": "mine"}).status_code == 404
    assert other_client.post(f"/jobs/presets/{night.pk}/delete/").status_code == 404
    assert other_client.get(f"/jobs/presets/{night.pk}/export/").status_code == 404
    assert Preset.objects.filter(name="night").exists()


def test_save_as_preset_keeps_the_forms_settings_not_its_prompt(member_client, member, device):
    response = member_client.post(
        "/jobs/presets/save/", video_post(device, preset_name="Tall", size="480x832", steps="6", shared="on")
    )
    assert response.status_code == 302
    assert response["Location"] == f"/jobs/new/?kind=video&preset=Tall&device={device.pk}"
    preset = Preset.objects.get(owner=member)
    assert preset.values == {
        "model": VIDEO, "size": "480x832", "seconds": "2", "steps": "6", "when": "asap", "polite": True, "shared": True,
    }  # fmt: skip
    member_client.post("/jobs/presets/save/", video_post(device, preset_name="Fox", preset_keep_prompt="1"))
    assert Preset.objects.get(name="Fox").values["prompt"] == "a fox in the snow"


def test_a_refused_save_keeps_what_was_typed(member_client, device, night):
    response = member_client.post(
        "/jobs/presets/save/", video_post(device, preset_name="night", prompt="my words")
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert "The preset was not saved." in html and "You already have a video preset “night”." in html
    assert "my words" in html and 'value="night"' in html
    assert Preset.objects.count() == 1


def test_a_save_without_a_name_says_so_plainly_with_the_box_open(member_client, device):
    response = member_client.post("/jobs/presets/save/", video_post(device, preset_name=""))
    assert response.status_code == 400
    html = response.content.decode()
    assert "The preset was not saved. Give the preset a name." in html  # no "name:" field prefix
    assert '<details class="save-preset" id="save-preset" open>' in html  # the name field is in sight
    assert Preset.objects.count() == 0


def test_only_admins_save_for_the_household(member_client, admin_client, device):
    assert (
        member_client.post(
            "/jobs/presets/save/", video_post(device, preset_name="H", preset_household="1")
        ).status_code
        == 403
    )
    assert (
        admin_client.post(
            "/jobs/presets/save/", video_post(device, preset_name="H", preset_household="1")
        ).status_code
        == 302
    )
    assert Preset.objects.get().owner is None


def test_picking_a_preset_fills_the_form_and_keeps_the_typed_prompt(member_client, device, night):
    page = member_client.get(f"/jobs/new/?device={device.pk}&kind=video&preset=night&prompt=a+heron")
    assert page.status_code == 200
    form = page.context["form"]
    assert form.initial == {"model": VIDEO, "size": "480x832", "steps": 5, "seconds": 3, "prompt": "a heron"}
    html = page.content.decode()
    assert 'value="480x832" checked' in html and "a heron" in html
    assert '<option value="night" selected>' in html  # the picker says which


def test_an_unknown_preset_in_the_picker_says_so(member_client, device):
    page = member_client.get(f"/jobs/new/?device={device.pk}&kind=video&preset=gone")
    assert page.status_code == 200
    assert "No video preset “gone”" in page.content.decode()


def test_a_submit_with_a_preset_through_the_form(member_client, member, device, night):
    form = member_client.get(f"/jobs/new/?device={device.pk}&kind=video&preset=night").context["form"]
    posted = {name: form[name].value() for name in ("model", "size", "seconds", "steps", "when")}
    posted = {k: v for k, v in posted.items() if v is not None}
    response = member_client.post(
        "/jobs/new/", {"device": device.pk, "kind": "video", "prompt": "a fox", **posted}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    job = Job.objects.get()
    assert (job.params["size"], job.params["steps"], job.params["seconds"]) == ("480x832", 5, 3)


def test_rename_and_delete_after_a_confirmation(member_client, member, night):
    assert member_client.post(f"/jobs/presets/{night.pk}/rename/", {"name": "late"}).status_code == 302
    preset_create(by=member, kind="video", name="early", values={})
    refused = member_client.post(f"/jobs/presets/{night.pk}/rename/", {"name": "early"})
    assert refused.status_code == 400
    assert "You already have a video preset “early”." in refused.content.decode()
    confirm = member_client.get(f"/jobs/presets/{night.pk}/delete/")
    assert confirm.status_code == 200 and 'id="preset-delete-confirm"' in confirm.content.decode()
    assert Preset.objects.filter(pk=night.pk).exists()
    assert member_client.post(f"/jobs/presets/{night.pk}/delete/").status_code == 302
    assert not Preset.objects.filter(pk=night.pk).exists()


def test_members_cannot_rename_or_delete_the_households(member_client, admin_user):
    house = preset_create(by=admin_user, kind="video", name="house", values={}, household=True)
    assert member_client.post(f"/jobs/presets/{house.pk}/rename/", {"name": "mine"}).status_code == 403
    assert member_client.get(f"/jobs/presets/{house.pk}/delete/").status_code == 403
    assert member_client.post(f"/jobs/presets/{house.pk}/delete/").status_code == 403
    assert Preset.objects.get().name == "house"


def test_export_then_import_round_trips(member_client, other_client, other_member, night):
    exported = member_client.get("/jobs/presets/export/")
    assert exported["Content-Disposition"] == 'attachment; filename="presets.json"'
    one = member_client.get(f"/jobs/presets/{night.pk}/export/")
    assert json.loads(one.content)["presets"] == [{"name": "night", "kind": "video", "values": night.values}]
    upload = SimpleUploadedFile("presets.json", exported.content, "application/json")
    assert other_client.post("/jobs/presets/import/", {"file": upload}).status_code == 302
    mine = Preset.objects.get(owner=other_member)
    assert (mine.name, mine.values) == ("night", night.values)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"{not json", "This file is not valid JSON"),
        (b'{"presets": [{"name": "a", "kind": "video"}, {"name": "b", "kind": "video", "values": {"zoom": 1}}]}',
         "presets[1].values.zoom: Unknown field for video presets"),
        (b'{"presets": [{"name": "a", "kind": "video", "colour": "red"}]}', "presets[0].colour: Unknown field"),
    ],
)  # fmt: skip
def test_a_bad_import_says_why_and_imports_nothing(member_client, content, words):
    response = member_client.post(
        "/jobs/presets/import/", {"file": SimpleUploadedFile("p.json", content, "application/json")}
    )
    assert response.status_code == 400
    assert words in response.content.decode()
    assert not Preset.objects.exists()


def test_viewers_see_the_household_presets_but_keep_none(viewer_client, admin_user, device):
    preset_create(by=admin_user, kind="video", name="house", values={}, household=True)
    html = viewer_client.get("/jobs/presets/").content.decode()
    assert "house" in html and 'id="own-title"' not in html  # no empty "Yours" for someone who keeps none
    assert viewer_client.post("/jobs/presets/save/", video_post(device, preset_name="v")).status_code == 403
    assert Preset.objects.count() == 1
