"""The doors' one intake (``jobs.doors.intake``): each step on its own, as the page, REST and /v1 use it."""

from __future__ import annotations

import pytest
from django.contrib.messages.storage.fallback import FallbackStorage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import RequestFactory

from devices.models import Device
from jobs.doors import intake
from jobs.models import Job
from jobs.queue.admission import RequestInvalid
from jobs.tests.ui_fixtures import MESH, PNG, VIDEO, make_job

pytestmark = pytest.mark.django_db

SHORT = {"prompt": "fox", "size": "832x480", "seconds": 2, "steps": 4}
TOKEN = "t" * 24


def _post(user, data, files=None):
    request = RequestFactory().post("/jobs/new/", {**data, **(files or {})})
    request.user = user
    request.session = {}
    request._messages = FallbackStorage(request)
    return request


def _get(user, **query):
    request = RequestFactory().get("/jobs/new/", query)
    request.user = user
    return request


# -- the device and the kind ---------------------------------------------------------------------------------


def test_find_device_takes_an_id_and_with_names_a_name_in_any_case(device):
    assert intake.find_device(str(device.pk)) == device
    assert intake.find_device("Pocket") is None  # an id only, unless names are asked for
    assert intake.find_device("pocket", by_name=True) == device
    assert intake.find_device("²") is None and intake.find_device("9" * 400) is None
    assert intake.find_device(device.pk, among=Device.objects.none()) is None


def test_page_request_falls_back_quietly_on_a_get_but_names_a_problem_on_a_post(device, member):
    taken = intake.page_request(_get(member, kind="bogus"))
    assert (taken.device, taken.kind) == (device, "video") and "Unknown kind “bogus”" in taken.problem
    ts = Device.objects.create(
        name="ts", kind="tensorsharp", base_url="http://127.0.0.1:1"
    )  # it reports nothing
    switched = intake.page_request(_get(member, device=ts.pk, kind="speech"))  # the picker switching devices
    assert switched.device == ts and switched.problem == ""
    posted = intake.page_request(_post(member, {"device": ts.pk, "kind": "speech"}))
    assert "ts can't run speech jobs" in posted.problem


def test_page_request_names_a_device_that_is_not_there_and_reads_the_token(device, member):
    taken = intake.page_request(_post(member, {"device": "404", "kind": "video", "submit_token": TOKEN}))
    assert taken.device == device and "No such device “404”" in taken.problem
    assert taken.token == TOKEN
    assert intake.page_request(_post(member, {"submit_token": "short"})).token is None


# -- the kind's form -------------------------------------------------------------------------------------------


def test_form_for_refuses_a_kind_by_name(device, member):
    with pytest.raises(RequestInvalid) as exc:
        intake.form_for(owner=member, device=device, kind="bogus", data=None)
    assert exc.value.first()[0] == "kind"


def test_offered_models_are_the_forms_choices_and_none_for_a_kind_it_cannot_run(device):
    assert intake.offered_models(device, "video") == [VIDEO]
    assert intake.offered_models(device, "mesh") == [MESH]
    ts = Device.objects.create(name="ts", kind="tensorsharp", base_url="http://127.0.0.1:1")
    assert intake.offered_models(ts, "speech") == []


def test_with_defaults_fills_what_a_script_left_out_as_the_page_would(device, member):
    data = intake.with_defaults(owner=member, device=device, kind="video", data={"model": VIDEO}, files={})
    assert data["model"] == VIDEO and data["polite"] is True and data["when"] == "asap"
    kept = intake.with_defaults(
        owner=member, device=device, kind="video", data={"model": VIDEO, "polite": False}, files={}
    )
    assert kept["polite"] is False


def test_check_request_refuses_a_members_lift_before_binding_anything(device, member):
    with pytest.raises(RequestInvalid) as exc:
        intake.check_request(
            owner=member, device=device, kind="video", data={"model": VIDEO, **SHORT, "lift_limits": "1"}
        )
    assert exc.value.first()[0] == "lift_limits"


def test_form_again_makes_the_file_fields_optional(device, member):
    job = make_job(member, device, kind="mesh")
    form = intake.form_again(owner=member, job=job, data=None)
    assert form.fields["image"].required is False


def test_add_errors_puts_a_refusal_on_its_field_or_on_the_form(device, member):
    data = {"model": VIDEO, "when": "asap", **SHORT}
    form = intake.form_for(owner=member, device=device, kind="video", data=data)
    assert form.is_valid(), form.errors
    intake.add_errors(form, RequestInvalid({"seconds": ["too long"], "nope": ["whole"], "__all__": ["all"]}))
    assert form.errors["seconds"] == ["too long"] and form.non_field_errors() == ["whole", "all"]


# -- the page's submit -----------------------------------------------------------------------------------------


def _page(member, device, **over):
    data = {
        "device": device.pk,
        "kind": "video",
        "model": VIDEO,
        "when": "asap",
        "submit_token": TOKEN,
        **SHORT,
    }
    request = _post(member, {**data, **over})
    taken = intake.page_request(request)
    return request, taken, intake.page_form(request, taken)


def test_submit_page_form_queues_an_admitted_try(device, member):
    request, taken, form = _page(member, device)
    job = intake.submit_page_form(request, form, taken.token)
    assert job is not None and job.owner == member and job.params["seconds"] == 2
    assert intake.already_queued(member, TOKEN) == job


def test_submit_page_form_leaves_a_refusal_on_the_form(device, member):
    request, taken, form = _page(member, device, size="1344x768", seconds=7, steps=8)
    assert intake.submit_page_form(request, form, taken.token) is None
    assert "55 minutes" in " ".join(form.non_field_errors()) and not Job.objects.exists()
    request, taken, form = _page(member, device, seconds=99)
    assert intake.submit_page_form(request, form, taken.token) is None and "seconds" in form.errors


def test_a_refused_try_keeps_its_upload_for_the_next_one(device, member, media):
    image = SimpleUploadedFile("start.png", PNG, "image/png")
    request, taken, form = _page(member, device, seconds=99, start_image=image)
    assert intake.submit_page_form(request, form, taken.token) is None
    intake.keep_uploads(request, form)
    assert form.kept_uploads["start_image"]["name"] == "start.png"
    request, taken, form = _page(member, device)  # the next try sends no file
    assert form.files["start_image"].read() == PNG
    job = intake.submit_page_form(request, form, taken.token)
    assert "start_image" in job.params["files"]
    assert intake.stashed_uploads(user=member, token=TOKEN, names=["start_image"]) == {}  # queued: it went
