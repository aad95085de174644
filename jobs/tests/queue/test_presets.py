"""Presets (``jobs.queue.presets``): values checked against the kind's form, one's own over the household's,
who may see and change which, and import all or nothing."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404

from jobs.models import Preset
from jobs.queue import presets as svc
from jobs.queue.admission import RequestInvalid
from jobs.tests.ui_fixtures import VIDEO

pytestmark = pytest.mark.django_db


def test_values_are_checked_against_the_kinds_form_with_its_words(member):
    with pytest.raises(RequestInvalid) as exc:
        svc.preset_create(
            by=member, kind="image", name="big", values={"width": 5, "steps": "many", "colour": "red"}
        )
    errors = exc.value.errors
    assert "256 to 2048" in errors["width"][0]
    assert errors["steps"] == ["Enter a whole number."]
    assert errors["colour"][0].startswith("Unknown field for image presets; its fields are:")
    assert not Preset.objects.exists()


def test_files_and_one_job_settings_are_never_kept(member):
    fields = svc.preset_fields("video")
    assert "start_image" not in fields and "end_image" not in fields and "not_before" not in fields
    with pytest.raises(RequestInvalid) as exc:
        svc.preset_create(by=member, kind="video", name="x", values={"start_image": "a.png"})
    assert "start_image" in exc.value.errors


def test_a_form_keeps_its_prompt_only_when_asked(member):
    posted = {"model": VIDEO, "prompt": "a fox", "size": "832x480", "polite": "on", "not_before": "2026"}
    without = svc.values_from_form("video", posted)
    assert "prompt" not in without and "not_before" not in without
    assert without["polite"] is True and without["shared"] is False  # an unticked box is kept as off
    assert svc.values_from_form("video", posted, keep_prompt=True)["prompt"] == "a fox"


def test_a_models_choices_are_judged_at_use_not_at_save(member):
    preset = svc.preset_create(
        by=member, kind="video", name="n", values={"model": "nobody/NoSuch", "steps": 99}
    )
    assert preset.values == {"model": "nobody/NoSuch", "steps": 99}
    with pytest.raises(RequestInvalid) as exc:  # but no value is a dump
        svc.preset_create(by=member, kind="video", name="m", values={"model": "x" * 7000, "seed": [1]})
    assert exc.value.errors == {
        "model": ["At most 6,000 characters."],
        "seed": ["Give a text, a number or true/false."],
    }


def test_ones_own_preset_wins_over_the_households_of_the_same_name(member, other_member, admin_user):
    svc.preset_create(by=admin_user, kind="video", name="night", values={"steps": 4}, household=True)
    svc.preset_create(by=member, kind="video", name="night", values={"steps": 8})
    assert svc.with_preset(owner=member, kind="video", name="night", data={}) == {"steps": 8}
    assert svc.with_preset(owner=other_member, kind="video", name="night", data={}) == {"steps": 4}
    # the request's own fields win over the preset's
    assert svc.with_preset(owner=member, kind="video", name="night", data={"steps": 5}) == {"steps": 5}


def test_an_unknown_preset_is_refused_naming_preset(member, other_member):
    svc.preset_create(by=other_member, kind="video", name="otto's", values={"steps": 4})
    for name in ("missing", "otto's"):  # another person's is exactly like a missing one
        with pytest.raises(RequestInvalid) as exc:
            svc.with_preset(owner=member, kind="video", name=name, data={})
        assert list(exc.value.errors) == ["preset"]
    with pytest.raises(RequestInvalid):  # a preset of another kind is not this kind's
        svc.preset_create(by=member, kind="image", name="img", values={})
        svc.with_preset(owner=member, kind="video", name="img", data={})


def test_members_see_their_own_and_the_households_never_anothers(member, other_member, admin_user):
    mine = svc.preset_create(by=member, kind="video", name="mine", values={})
    theirs = svc.preset_create(by=other_member, kind="video", name="theirs", values={})
    house = svc.preset_create(by=admin_user, kind="video", name="house", values={}, household=True)
    assert set(svc.presets_visible_to(member)) == {mine, house}
    assert set(svc.presets_visible_to(admin_user)) == {house}  # admins too: a person's presets are theirs
    with pytest.raises(Http404):
        svc.preset_for(member, theirs.pk)


def test_only_admins_make_or_change_the_households(member, admin_user):
    with pytest.raises(PermissionDenied):
        svc.preset_create(by=member, kind="video", name="h", values={}, household=True)
    house = svc.preset_create(by=admin_user, kind="video", name="h", values={}, household=True)
    for change in (
        lambda: svc.preset_update(preset=house, by=member, name="mine now"),
        lambda: svc.preset_delete(preset=house, by=member),
    ):
        with pytest.raises(PermissionDenied):
            change()
    assert Preset.objects.get().name == "h"
    svc.preset_update(preset=house, by=admin_user, name="Night")
    assert Preset.objects.get().name == "Night"


def test_names_are_unique_per_owner_and_kind(member, admin_user):
    svc.preset_create(by=member, kind="video", name="a", values={})
    svc.preset_create(by=member, kind="image", name="a", values={})  # another kind: fine
    svc.preset_create(
        by=admin_user, kind="video", name="a", values={}, household=True
    )  # the household's: fine
    with pytest.raises(RequestInvalid) as exc:
        svc.preset_create(by=member, kind="video", name=" a ", values={})
    assert exc.value.errors["name"] == ["You already have a video preset “a”."]
    with pytest.raises(RequestInvalid) as exc:
        svc.preset_create(by=member, kind="image", name="a", values={})
    assert exc.value.errors["name"] == ["You already have an image preset “a”."]
    b = svc.preset_create(by=member, kind="video", name="b", values={})
    with pytest.raises(RequestInvalid):
        svc.preset_update(preset=b, by=member, name="a")


def test_export_then_import_round_trips(member, other_member):
    svc.preset_create(by=member, kind="video", name="a", values={"steps": 4, "size": "832x480"})
    svc.preset_create(by=member, kind="speech", name="b", values={"voice": "Vivian", "input": None})
    exported = svc.presets_export(list(svc.presets_visible_to(member)))
    svc.presets_import(by=other_member, payload=exported)
    got = {(p.kind, p.name): p.values for p in svc.presets_visible_to(other_member)}
    assert got == {("video", "a"): {"steps": 4, "size": "832x480"}, ("speech", "b"): {"voice": "Vivian"}}


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (
            {
                "presets": [
                    {"name": "ok", "kind": "video", "values": {}},
                    {"name": "x", "kind": "video", "values": {"bogus": 1}},
                ]
            },
            "presets[1].values.bogus",
        ),
        (
            {"presets": [{"name": "ok", "kind": "video"}, {"name": "x", "kind": "sculpture"}]},
            "presets[1].kind",
        ),
        ({"presets": [{"name": "", "kind": "video"}]}, "presets[0].name"),
        ({"presets": [{"name": "a", "kind": "video", "colour": 1}]}, "presets[0].colour"),
        ({"presets": "nope"}, "presets"),
        ({"presets": [], "extra": 1}, "extra"),
        ([], "presets"),
    ],
)
def test_a_bad_import_names_the_preset_and_field_and_imports_nothing(member, payload, field):
    with pytest.raises(RequestInvalid) as exc:
        svc.presets_import(by=member, payload=payload)
    assert field in exc.value.errors
    assert not Preset.objects.exists()


def test_viewers_keep_no_presets(viewer):
    with pytest.raises(PermissionDenied):
        svc.preset_create(by=viewer, kind="video", name="v", values={})
