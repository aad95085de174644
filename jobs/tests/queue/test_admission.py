"""The one admission path: ``admit`` decides, and every door (the service itself included) obeys it. Raw fields
reach it through the doors' intake (``jobs.doors.intake.check_request``), which binds them to the kind's form."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from jobs.doors import intake
from jobs.kinds.table import SPECS, kinds_for, spec_for
from jobs.models import Job, JobState
from jobs.queue import admission, services
from jobs.tests.ui_fixtures import VIDEO, make_job

pytestmark = pytest.mark.django_db

LONG = {"prompt": "a long one", "size": "1344x768", "seconds": 7, "steps": 8}
SHORT = {"prompt": "fox", "size": "832x480", "seconds": 2, "steps": 4}


def test_it_refuses_a_render_the_device_would_cut_off(device, member):
    adm = admission.admit(owner=member, device=device, kind="video", model_id=VIDEO, params=LONG)
    assert adm.refused and "55 minutes" in adm.refused
    assert adm.estimate_s > 55 * 60


def test_a_refused_job_cannot_be_created_through_the_service(device, member):
    with pytest.raises(ValidationError) as exc:
        services.job_submit(owner=member, device=device, kind="video", model_id=VIDEO, params=LONG)
    assert "55 minutes" in " ".join(exc.value.messages)
    assert not Job.objects.exists()


def test_it_refuses_a_start_more_than_30_days_ahead(device, member):
    far = timezone.now() + dt.timedelta(days=31)
    adm = admission.admit(
        owner=member,
        device=device,
        kind="video",
        model_id=VIDEO,
        params=SHORT,
        when="not_before",
        not_before=far,
    )
    assert adm.refused_field == "not_before" and "30 days" in adm.refused
    with pytest.raises(ValidationError):
        services.job_submit(
            owner=member,
            device=device,
            kind="video",
            model_id=VIDEO,
            params=SHORT,
            when="not_before",
            not_before=far,
        )
    assert not Job.objects.exists()


def test_an_asap_estimate_is_not_pushed_behind_a_job_waiting_for_the_night(device, member, other_member):
    device.night_start, device.night_end = dt.time(23, 0), dt.time(23, 1)  # the night is almost a day away
    device.save()
    tonight = make_job(other_member, device, state=JobState.SCHEDULED, when="tonight", estimate_s=600)
    adm = admission.admit(owner=member, device=device, kind="video", model_id=VIDEO, params=SHORT)
    assert adm.refused is None
    assert adm.starts_at - timezone.now() < dt.timedelta(minutes=1)  # it starts now, not after the night job
    assert adm.ready_at > adm.starts_at
    assert tonight.when == "tonight"


def test_check_request_takes_the_forms_fields_and_defaults(device, member):
    checked = intake.check_request(owner=member, device=device, kind="video", data={"model": VIDEO, **SHORT})
    assert (
        checked.params == SHORT and checked.schedule["polite"] is True and checked.schedule["when"] == "asap"
    )
    off = intake.check_request(
        owner=member, device=device, kind="video", data={"model": VIDEO, **SHORT, "polite": False}
    )
    assert off.schedule["polite"] is False


def test_check_request_names_the_field_and_the_reason(device, member):
    with pytest.raises(admission.RequestInvalid) as exc:
        intake.check_request(
            owner=member, device=device, kind="video", data={"model": VIDEO, **SHORT, "seconds": 8}
        )
    assert "seconds" in exc.value.errors
    with pytest.raises(admission.RequestInvalid) as refused:
        intake.check_request(owner=member, device=device, kind="video", data={"model": VIDEO, **LONG})
    assert refused.value.first()[1].startswith("This render would take about")
    with pytest.raises(admission.RequestInvalid) as bogus:
        intake.check_request(owner=member, device=device, kind="bogus", data={})
    assert bogus.value.first()[0] == "kind" and "video" in bogus.value.first()[1]
    assert not Job.objects.exists()


def test_viewers_cannot_submit_through_any_path(device, viewer):
    with pytest.raises(PermissionDenied):
        intake.submit_request(owner=viewer, device=device, kind="video", data={"model": VIDEO, **SHORT})
    assert not Job.objects.exists()


def test_submit_request_queues_one_job_with_the_admitted_estimate(device, member):
    job, adm = intake.submit_request(
        owner=member, device=device, kind="video", data={"model": VIDEO, **SHORT}
    )
    assert job.state == JobState.QUEUED and job.estimate_s == pytest.approx(adm.estimate_s)


def test_the_registry_names_a_form_runner_and_estimate_for_every_pair():
    pairs = {(s.device_kind, str(s.kind)) for s in SPECS}
    assert pairs == {
        ("tiiny", "video"),
        ("tiiny", "mesh"),
        ("tiiny", "music"),
        ("tiiny", "image"),
        ("tiiny", "speech"),
        ("tensorsharp", "video"),
        ("tensorsharp", "image"),
    }
    assert spec_for("tiiny", "video").style == "poll" and spec_for("tensorsharp", "video").style == "stream"
    with pytest.raises(ValueError, match="TensorSharp server cannot run music"):
        spec_for("tensorsharp", "music")


def test_kinds_for_follows_what_the_device_reports(device):
    assert kinds_for(device) == ["video", "mesh", "music", "image", "speech"]


def test_a_model_may_be_named_without_its_publisher_when_that_is_unambiguous(device, member):
    for typed in ("MiniMax-H3-Turbo", "minimax/minimax-h3-turbo", VIDEO):
        checked = intake.check_request(
            owner=member, device=device, kind="video", data={"model": typed, **SHORT}
        )
        assert checked.model_id == VIDEO
    with pytest.raises(admission.RequestInvalid) as exc:
        intake.check_request(
            owner=member, device=device, kind="video", data={"model": "Other/Thing", **SHORT}
        )
    assert "model" in exc.value.errors


def test_the_model_refuses_a_far_not_before_in_any_form(device, member):
    """The admin site edits a Job through its model (ModelForm → full_clean): the same 30-day rule holds there."""
    from jobs.models import Job as JobModel

    job = JobModel(owner=member, device=device, kind="video", model_id=VIDEO, params=SHORT, when="not_before")
    job.not_before = timezone.now() + dt.timedelta(days=400)
    with pytest.raises(ValidationError) as exc:
        job.full_clean()
    assert "30 days" in str(exc.value)


# -- admit's named steps -----------------------------------------------------------------------------------------


def test_schedule_refusal_names_the_field_of_a_time_that_cannot_be():
    now = timezone.now()
    assert admission._schedule_refusal("asap", None, now) is None
    assert admission._schedule_refusal("someday", None, now).refused_field == "when"
    assert admission._schedule_refusal("not_before", None, now).refused_field == "not_before"
    far = admission._schedule_refusal("not_before", now + dt.timedelta(days=31), now)
    assert far.refused_field == "not_before" and "30 days" in far.refused
    assert admission._schedule_refusal("not_before", now + dt.timedelta(days=1), now) is None


def test_refusal_puts_the_devices_limit_before_a_lift_and_a_lift_before_a_quota(member, admin_user):
    from jobs.quotas.services import LIFT_ADMINS_ONLY, Verdict

    spec = spec_for("tiiny", "video")
    over, fine = Verdict(refused="Over your daily minutes."), Verdict()
    why, name = admission._refusal(spec, owner=member, estimate_s=4000, lift_limits=True, quota=over)
    assert "55 minutes" in why and name is None
    assert admission._refusal(spec, owner=member, estimate_s=60, lift_limits=True, quota=over) == (
        LIFT_ADMINS_ONLY,
        "lift_limits",
    )
    assert admission._refusal(spec, owner=admin_user, estimate_s=60, lift_limits=True, quota=over) == (
        "Over your daily minutes.",
        "__all__",
    )
    assert admission._refusal(spec, owner=member, estimate_s=60, lift_limits=False, quota=fine) == (
        None,
        None,
    )
    assert admission._limit_refusal(spec_for("tiiny", "mesh"), 10**6) is None  # a pair with no hard limit


def test_check_form_admits_once_and_hands_over_what_services_queue(device, member, monkeypatch):
    calls = []
    real = admission.admit
    monkeypatch.setattr(admission, "admit", lambda **kw: calls.append(kw) or real(**kw))
    form = intake.form_for(
        owner=member, device=device, kind="video", data={"model": VIDEO, "when": "asap", **SHORT}
    )
    checked = admission.check_form(form)
    assert len(calls) == 1 and checked.params == SHORT and checked.admission.estimate_s > 0
    assert checked.schedule == {"when": "asap", "not_before": None, "polite": False, "shared": False}
