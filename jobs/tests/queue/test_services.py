"""Services and selectors: permissions, visibility, compare-and-set (no workers; dispatch is enqueued only)."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404

from devices.models import Device
from jobs.core.selectors import job_for, jobs_visible_to, queue_plan
from jobs.models import Job
from jobs.queue.services import (
    job_cancel,
    job_retry,
    job_run_again,
    job_set_shared,
    job_share_link,
    job_submit,
    queue_move,
    queue_pause,
    queue_run_next,
)

pytestmark = pytest.mark.django_db
V = "MiniMaxAI/MiniMax-H3-Turbo"


@pytest.fixture
def device():
    return Device.objects.create(name="p", base_url="http://127.0.0.1:1", state="online", queue_paused=True)


def submit(owner, device, **kw):
    return job_submit(
        owner=owner,
        device=device,
        kind="video",
        model_id=V,
        params={"prompt": "secret fox", "size": "832x480", "seconds": 2, "steps": 4},
        **kw,
    )


def test_it_refuses_viewers(device, viewer):
    with pytest.raises(PermissionDenied):
        submit(viewer, device)


def test_it_writes_the_first_event_and_an_estimate(device, member):
    job = submit(member, device)
    assert job.state == "queued" and job.estimate_s > 400
    assert list(job.events.values_list("seq", "state")) == [(1, "queued")]


def test_it_schedules_tonight_jobs(device, member):
    Device.objects.filter(pk=device.pk).update(night_start="00:00", night_end="00:01")
    device.refresh_from_db()
    assert submit(member, device, when="tonight").state == "scheduled"


def test_it_shows_jobs_only_to_those_allowed(device, member, other_member, admin_user):
    job = submit(member, device)
    assert job_for(member, job.pk) == job
    assert job_for(admin_user, job.pk) == job
    with pytest.raises(Http404):
        job_for(other_member, job.pk)
    assert not jobs_visible_to(other_member).exists()
    job_set_shared(job=job, by=member, shared=True)
    assert job_for(other_member, job.pk)
    with pytest.raises(PermissionDenied):
        job_cancel(job=job, by=other_member)


def test_it_cancels_once_even_when_clicked_twice(device, member):
    job = submit(member, device)
    job_cancel(job=job, by=member)
    job_cancel(job=job, by=member)  # harmless
    job.refresh_from_db()
    assert job.state == "cancelled"
    assert job.events.filter(state="cancelled").count() == 1
    retried = job_retry(job=job, by=member)
    assert retried.state == "queued"
    with pytest.raises(ValidationError):
        Job.objects.filter(pk=job.pk).update(state="done")
        job_retry(job=job, by=member)


def test_it_lets_admins_reorder_and_run_next(device, member, other_member, admin_user):
    a, b, c = submit(member, device), submit(other_member, device), submit(member, device)
    with pytest.raises(PermissionDenied):
        queue_run_next(job=c, by=member)
    queue_run_next(job=c, by=admin_user)
    assert [j.pk for j in queue_plan(device)][0] == c.pk
    queue_move(job=a, by=admin_user, direction="down")
    order = [j.pk for j in queue_plan(device)]
    assert order.index(a.pk) > order.index(b.pk)
    queue_pause(device=device, by=admin_user)


def test_it_creates_and_revokes_share_links(device, member):
    job = job_share_link(job=submit(member, device), by=member, enable=True)
    assert len(job.share_token) > 20
    assert job_share_link(job=job, by=member, enable=False).share_token == ""


def test_it_serves_artifacts_only_to_allowed_people(device, member, other_member, settings, tmp_path, rf):
    from jobs.files.downloads import artifact_response
    from jobs.files.store import save_artifact

    settings.MEDIA_ROOT = tmp_path
    job = submit(member, device)
    art = save_artifact(job, kind="image", name="a.png", data=b"png-bytes", mime="image/png")
    request = rf.get("/")
    request.user = member
    response = artifact_response(request, art)
    assert b"".join(response.streaming_content) == b"png-bytes"
    request.user = other_member
    with pytest.raises(Http404):
        artifact_response(request, art)
    settings.JOBS_SENDFILE = "x-accel"
    request.user = member
    assert artifact_response(request, art)["X-Accel-Redirect"].endswith(f"results/{member.pk}/{job.pk}/a.png")


def test_submit_checked_queues_an_admitted_request_without_admitting_it_again(device, member, monkeypatch):
    from jobs.queue import admission, services
    from jobs.queue.admission import Admission, CheckedRequest

    def refuse(**kw):
        raise AssertionError("admitted twice")

    monkeypatch.setattr(services, "admit", refuse)
    monkeypatch.setattr(admission, "admit", refuse)
    params = {"prompt": "fox", "size": "832x480", "seconds": 2, "steps": 4}
    schedule = {"when": "asap", "not_before": None, "polite": True, "shared": True}
    checked = CheckedRequest("video", V, params, {}, schedule, Admission(123.0, None, None))
    job = services.submit_checked(owner=member, device=device, checked=checked, idempotency_key="k" * 20)
    assert job.estimate_s == 123.0 and job.shared and job.prompt == "fox" and job.state == "queued"
    again = services.submit_checked(owner=member, device=device, checked=checked, idempotency_key="k" * 20)
    assert again.pk == job.pk and again.idempotent_replay
    with pytest.raises(PermissionDenied):
        services.submit_checked(owner=viewer_of(member), device=device, checked=checked)


def viewer_of(member):
    from hub.accounts.models import User

    return User.objects.create_user("watcher", password="pw-watch-1", role="viewer")


def test_run_again_keeps_the_jobs_inputs_and_saves_no_new_ones(device, member):
    from jobs.queue.admission import Admission, CheckedRequest

    first = submit(member, device)
    Job.objects.filter(pk=first.pk).update(params={**first.params, "files": {"start_image": "results/x.png"}})
    first.refresh_from_db()
    params = {"prompt": "fox again", "size": "832x480", "seconds": 3, "steps": 4}
    schedule = {"when": "asap", "not_before": None, "polite": True, "shared": False}
    checked = CheckedRequest(
        "video", V, params, {"start_image": object()}, schedule, Admission(50.0, None, None)
    )
    again = job_run_again(job=first, by=member, checked=checked)
    assert again.params == {**params, "files": {"start_image": "results/x.png"}}
    assert again.estimate_s == 50.0 and again.pk != first.pk
