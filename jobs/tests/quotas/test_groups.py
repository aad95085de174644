"""Groups (issue 38): what a person may use, offered by every door's listing and refused at submit by name.

A kids' group limited to the image model sees only it on the new-job page, in ``/v1/models`` (the real ``openai``
SDK) and in the REST capabilities; a video, another model or another device is refused by name on the page, REST
and /v1; "any device" chooses only among the group's devices; a group's shared quota counts its members together;
``manage.py group``. The rule itself ("the stricter wins") is a property test.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from hypothesis import given, settings
from hypothesis import strategies as st

from hub.accounts.groups import Allowance, GroupLists, allowance_for, combine
from hub.accounts.models import UserGroup
from jobs.models import DeviceUse, Job
from jobs.queue import enqueue
from jobs.quotas import groups
from jobs.quotas import services as quotas
from jobs.tests.quotas.test_quota import sdk_for
from jobs.tests.ui_fixtures import IMAGE, MUSIC, VIDEO, another_tiiny

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

IMAGE_FIELDS = {"model": IMAGE, "prompt": "a kite", "width": 512, "height": 512, "n": 1}
VIDEO_FIELDS = {"model": VIDEO, "prompt": "a fox", "size": "832x480", "seconds": 2, "steps": 4}


@pytest.fixture(autouse=True)
def _quiet(settings, monkeypatch):
    settings.HUB_API_SUBMIT_RATE = "0"
    monkeypatch.setattr(enqueue, "send", lambda *a, **kw: None)  # no broker: the pool's work is not sent


def bearer(user) -> Client:
    from hub.accounts.tokens import token_create

    raw = token_create(user=user, name="script", scopes=["read", "submit"])[1]
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def make_group(name="kids", *members, **kw) -> UserGroup:
    group = groups.group_save(by=None, name=name, **kw)
    for person in members:
        groups.member_add(by=None, group=group, user=person)
    return group


@pytest.fixture
def kitchen_tiiny(device):
    return another_tiiny("Kitchen")


@pytest.fixture
def kids(member, device):
    return make_group("kids", member, models=["Z-Image-Turbo"], kinds=["image"], devices=[device.name])


def text(response) -> str:
    return html.unescape(response.content.decode())


# -- the rule: the stricter wins --------------------------------------------------------------------------------

MODELS = ["a/One", "b/Two", "c/Three", "d/Four"]
lists = st.builds(
    GroupLists,
    models=st.frozensets(st.sampled_from(MODELS)),
    kinds=st.frozensets(st.sampled_from(["video", "image", "speech"])),
    devices=st.frozensets(st.integers(1, 4)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(lists, max_size=4), st.sampled_from(MODELS), st.sampled_from(["video", "image", "speech"]),
       st.integers(1, 4))  # fmt: skip
def test_a_thing_is_allowed_only_if_every_group_that_limits_it_allows_it(limits, model, kind, device):
    allowance = combine(limits)
    assert allowance.model_ok(model) == all(model in g.models for g in limits if g.models)
    assert allowance.kind_ok(kind) == all(kind in g.kinds for g in limits if g.kinds)
    assert allowance.device_ok(device) == all(device in g.devices for g in limits if g.devices)
    # One more group never allows more (a group with empty lists limits nothing).
    stricter = combine([*limits, GroupLists(models=frozenset(MODELS[:1]))])
    assert stricter.model_ok(model) <= allowance.model_ok(model)


def test_a_model_matches_by_its_name_after_the_publisher():
    allowance = Allowance(models=(frozenset({"Tongyi-MAI/Z-Image-Turbo"}),))
    assert allowance.model_ok("other/z-image-turbo") and not allowance.model_ok(VIDEO)


def test_the_smallest_per_person_limit_wins_and_own_no_limit_does_not_lift_a_groups(admin_user, member):
    from jobs.models import UNLIMITED

    quotas.quota_set(by=admin_user, device_minutes_per_day=100, max_queued=2)
    quotas.quota_set(by=admin_user, user=member, device_minutes_per_week=UNLIMITED)
    make_group("kids", member, device_minutes_per_day=30, device_minutes_per_week=300, max_queued=5)
    make_group("guests", member, device_minutes_per_day=45)
    limits = quotas.limits_for(member)
    assert (limits.device_minutes_per_day, limits.device_minutes_per_week, limits.max_queued) == (30, 300, 2)


# -- every door's listing ---------------------------------------------------------------------------------------


def test_the_new_job_page_offers_only_the_groups_devices_kinds_and_models(member_client, kids, device,
                                                                            kitchen_tiiny):  # fmt: skip
    page = text(member_client.get("/jobs/new/"))
    assert IMAGE in page and VIDEO not in page
    assert "Kitchen" not in page  # the device picker lists the group's devices only
    assert 'href="/jobs/new/?device=' not in page or "kind=video" not in page
    image = text(member_client.get(f"/jobs/new/?device={device.pk}&kind=image"))
    assert f'value="{IMAGE}"' in image and MUSIC not in image


def test_v1_models_lists_only_the_groups_models_through_the_sdk(member, kids, device, kitchen_tiiny):
    with sdk_for(member) as sdk:
        assert [m.id for m in sdk.models.list().data] == [IMAGE]


def test_rest_capabilities_list_only_what_the_group_may_use(member, kids, device, kitchen_tiiny):
    script = bearer(member)
    caps = script.get(f"/api/devices/{device.pk}/capabilities").json()
    assert caps["usable"] is True and caps["job_kinds"] == ["image"]
    assert [m["id"] for m in caps["models"]] == [IMAGE] and caps["video"] == {}
    other = script.get(f"/api/devices/{kitchen_tiiny.pk}/capabilities").json()
    assert (other["usable"], other["job_kinds"], other["models"]) == (False, [], [])


def test_someone_in_no_group_sees_everything(other_member, kids, device, kitchen_tiiny):
    with sdk_for(other_member) as sdk:
        assert VIDEO in [m.id for m in sdk.models.list().data]
    caps = bearer(other_member).get(f"/api/devices/{kitchen_tiiny.pk}/capabilities").json()
    assert "video" in caps["job_kinds"]


# -- refused at submit, by name, at every door -------------------------------------------------------------------


def test_a_video_is_refused_by_name_on_the_page_rest_and_v1(member, member_client, kids, device):
    page = member_client.post(
        "/jobs/new/", {"device": device.pk, "kind": "video", "when": "asap", **VIDEO_FIELDS}
    )
    assert "Your group may not use video jobs." in text(page)
    rest = bearer(member).post(
        "/api/jobs", {"device": device.pk, "kind": "video", **VIDEO_FIELDS}, content_type="application/json"
    )
    assert rest.status_code == 422 and rest.json()["errors"]["kind"] == ["Your group may not use video jobs."]
    with sdk_for(member) as sdk:
        import openai

        with pytest.raises(openai.BadRequestError) as refused:
            sdk.videos.create(model=VIDEO, prompt="fox", size="832x480", seconds="2")
    assert "Your group may not use video jobs." in refused.value.message
    assert not Job.objects.exists()


def test_a_model_outside_the_list_is_refused_by_its_name(member, member_client, device):
    make_group("kids", member, models=["MiniMax-H3-Turbo"])
    body = {"device": device.pk, "kind": "image", **IMAGE_FIELDS}
    rest = bearer(member).post("/api/jobs", body, content_type="application/json")
    assert rest.status_code == 422 and rest.json()["errors"]["model"] == [
        "Your group may not use Z-Image-Turbo."
    ]
    page = member_client.post("/jobs/new/", {**body, "when": "asap"})
    assert "Your group may not use Z-Image-Turbo." in text(page)
    with sdk_for(member) as sdk:
        import openai

        with pytest.raises(openai.BadRequestError) as refused:
            sdk.images.generate(model="Z-Image-Turbo", prompt="a kite", size="512x512")
    assert "Your group may not use Z-Image-Turbo." in refused.value.message
    # What the group allows still queues.
    ok = bearer(member).post(
        "/api/jobs", {"device": device.pk, "kind": "video", **VIDEO_FIELDS}, content_type="application/json"
    )
    assert ok.status_code == 201, ok.content


def test_a_device_outside_the_list_is_refused_by_its_name(member, member_client, device, kitchen_tiiny):
    make_group("kids", member, devices=["Pocket"])
    body = {"device": kitchen_tiiny.pk, "kind": "image", **IMAGE_FIELDS}
    rest = bearer(member).post("/api/jobs", body, content_type="application/json")
    assert rest.status_code == 422, rest.content
    assert rest.json()["errors"]["device"] == ["Your group may not use Kitchen."]
    with sdk_for(member) as sdk:
        import openai

        with pytest.raises(openai.BadRequestError) as refused:
            sdk.images.generate(
                model=IMAGE, prompt="a kite", size="512x512", extra_body={"device": "Kitchen"}
            )
    assert "Your group may not use Kitchen." in refused.value.message
    assert not Job.objects.exists()


def test_any_device_chooses_only_among_the_groups_devices(member, device, kitchen_tiiny):
    make_group("kids", member, devices=["Kitchen"])
    rest = bearer(member).post(
        "/api/jobs", {"device": "any", "kind": "image", **IMAGE_FIELDS}, content_type="application/json"
    )
    assert rest.status_code == 201, rest.content
    job = Job.objects.get()
    assert (job.device_id, job.pool) == (kitchen_tiiny.pk, [kitchen_tiiny.pk])


def test_a_device_the_group_may_not_use_never_joins_a_waiting_jobs_pool(member, device, kitchen_tiiny):
    from jobs.queue.membership import takes

    make_group("kids", member, devices=["Pocket"])
    rest = bearer(member).post(
        "/api/jobs", {"device": "any", "kind": "image", **IMAGE_FIELDS}, content_type="application/json"
    )
    job = Job.objects.get(pk=rest.json()["id"])
    assert job.pool == [device.pk] and not takes(kitchen_tiiny, job) and takes(device, job)


def test_the_services_way_in_obeys_the_groups_too(member, kids, device):
    from django.core.exceptions import ValidationError

    from jobs.queue import services

    with pytest.raises(ValidationError, match="Your group may not use MiniMax-H3-Turbo."):
        services.job_submit(owner=member, device=device, kind="image", model_id=VIDEO, params={"prompt": "x"})


# -- the shared quota -----------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("midday")
def test_a_shared_quota_counts_every_member_together(member, other_member, device):
    make_group("kids", member, other_member, shared_minutes_per_day=20)
    now = quotas.timezone.now()
    DeviceUse.objects.create(
        owner=member, device=device, started=now - dt.timedelta(minutes=12), ended=now, seconds=0
    )
    DeviceUse.objects.create(
        owner=other_member, device=device, started=now - dt.timedelta(minutes=7), ended=now, seconds=0
    )
    assert (
        quotas.quota_check(owner=member, estimate_s=30).refused is None
    )  # 19 of 20 minutes, plus half a minute
    refused = quotas.quota_check(owner=other_member, estimate_s=5 * 60).refused
    assert refused.startswith("Group “kids”, shared daily device time: 19 of 20 minutes used today")
    rest = bearer(other_member).post(
        "/api/jobs", {"device": device.pk, "kind": "video", **VIDEO_FIELDS}, content_type="application/json"
    )
    assert rest.status_code == 422 and "Group “kids”, shared daily device time" in json.dumps(
        rest.json(), ensure_ascii=False
    )


# -- manage.py group -------------------------------------------------------------------------------------------------


def run(*args) -> str:
    out = StringIO()
    call_command("group", *args, stdout=out)
    return out.getvalue()


def test_the_command_creates_a_group_and_adds_people(member, device):
    out = run("create", "kids", "--models", "Z-Image-Turbo", "--kinds", "image", "--devices", "pocket")
    assert "Created the group kids." in out and "models:  Z-Image-Turbo" in out
    group = UserGroup.objects.get(name="kids")
    assert (group.model_ids, group.kinds, group.devices) == ([IMAGE], ["image"], [device.pk])
    assert "mia is now in kids." in run("add", "kids", "mia")
    assert allowance_for(type(member).objects.get(pk=member.pk)).kinds == frozenset({"image"})
    assert "mia" in run("list")
    assert "mia is no longer in kids." in run("remove", "kids", "mia")
    run("change", "kids", "--kinds", "", "--shared-minutes-per-day", "60")
    group.refresh_from_db()
    assert (group.kinds, group.shared_minutes_per_day) == ([], 60)
    assert "Deleted the group kids." in run("delete", "kids")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("create", "kids", "--models", "Nope-9"), "No device has the model Nope-9."),
        (("create", "kids", "--kinds", "painting"), "Unknown kind painting."),
        (("create", "kids", "--devices", "Attic"), "No device Attic. Devices: Pocket."),
        (("add", "kids", "nobody"), "No one is called 'nobody'."),
        (("add", "nogroup", "mia"), "No group 'nogroup'."),
        (("create", "kids", "--shared-minutes-per-day", "-3"), "give a whole number"),
    ],
)
def test_the_command_refuses_bad_input_clearly(member, device, args, words):
    if args[1] == "kids" and args[0] == "add":
        make_group("kids")
    with pytest.raises(CommandError, match=words.replace(".", r"\.")):
        run(*args)


# -- the Groups page ---------------------------------------------------------------------------------------------------


def test_the_groups_page_is_for_admins_only(member_client, viewer, kids):
    for url in ("/groups/", f"/groups/{kids.pk}/", f"/groups/{kids.pk}/delete/"):
        assert member_client.get(url).status_code == 403
    assert (
        member_client.post(f"/groups/{kids.pk}/members/", {"action": "remove", "username": "mia"}).status_code
        == 403
    )
    assert member_client.post(f"/groups/{kids.pk}/delete/").status_code == 403
    assert UserGroup.objects.filter(pk=kids.pk, members__username="mia").exists()
    assert Client().get("/groups/").status_code in (302, 401, 403)


def test_an_admin_creates_edits_fills_and_deletes_a_group(admin_client, member, device):
    empty = text(admin_client.get("/groups/"))
    assert 'id="groups-empty"' in empty
    assert f'value="{IMAGE}"' in empty and "Z-Image-Turbo" in empty  # the choices: what the devices report
    made = admin_client.post(
        "/groups/", {"name": "kids", "models": [IMAGE], "kinds": ["image"], "devices": [str(device.pk)],
                     "shared_minutes_per_day": "60"},
    )  # fmt: skip
    group = UserGroup.objects.get(name="kids")
    assert made.status_code == 302 and made["Location"] == f"/groups/{group.pk}/"
    assert (group.model_ids, group.kinds, group.devices, group.shared_minutes_per_day) == (
        [IMAGE],
        ["image"],
        [device.pk],
        60,
    )
    admin_client.post(f"/groups/{group.pk}/members/", {"action": "add", "username": "mia"})
    assert list(group.members.values_list("username", flat=True)) == ["mia"]
    page = text(admin_client.get(f"/groups/{group.pk}/"))
    assert 'id="member-' in page and "mia" in page
    admin_client.post(f"/groups/{group.pk}/", {"name": "little ones", "kinds": ["image", "speech"]})
    group.refresh_from_db()
    assert (group.name, group.kinds, group.model_ids, group.shared_minutes_per_day) == (
        "little ones",
        ["image", "speech"],
        [],
        None,
    )
    admin_client.post(f"/groups/{group.pk}/members/", {"action": "remove", "username": "mia"})
    assert not group.members.exists()
    ask = text(admin_client.get(f"/groups/{group.pk}/delete/"))
    assert "Delete the group “little ones”?" in ask and UserGroup.objects.filter(pk=group.pk).exists()
    assert admin_client.post(f"/groups/{group.pk}/delete/").status_code == 302
    assert not UserGroup.objects.exists()


def test_bad_input_on_the_page_is_a_form_error(admin_client, device):
    make_group("kids")
    taken = admin_client.post("/groups/", {"name": "Kids"})
    assert taken.status_code == 400 and "There is already a group called “Kids”." in text(taken)
    bad = admin_client.post("/groups/", {"name": "x", "models": ["nope/Nothing"], "devices": ["999"]})
    assert bad.status_code == 400 and "Select a valid choice" in text(bad)
    negative = admin_client.post("/groups/", {"name": "x", "max_queued": "-1"})
    assert negative.status_code == 400 and UserGroup.objects.count() == 1
    unknown = admin_client.post(
        f"/groups/{UserGroup.objects.get().pk}/members/", {"action": "add", "username": "zed"}
    )
    assert unknown.status_code == 302
    assert admin_client.get("/groups/9999/").status_code == 404


def test_the_rest_device_list_says_which_devices_a_person_may_use(member, kids, device, kitchen_tiiny):
    listed = {d["name"]: d["usable"] for d in bearer(member).get("/api/devices").json()}
    assert listed == {"Pocket": True, "Kitchen": False}


def test_a_result_offers_no_next_step_of_a_kind_the_group_does_not_allow(member, other_member, kids, device):
    from jobs.doors.result_actions import BY_NAME, offers

    assert "animate" in offers(other_member)
    assert all(BY_NAME[name].kind == "image" for name in offers(member))
