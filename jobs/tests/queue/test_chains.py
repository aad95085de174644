"""Chains: a file input taken from another job's result (``ResultRef``), checked at submit, held, released in the
parent's done transaction, kept waiting when the parent fails, cancelled down the chain when it is cancelled or
deleted (no workers: dispatch is only enqueued)."""

from __future__ import annotations

import io

import pytest
from django.core.exceptions import ValidationError
from PIL import Image

from jobs.core.links import ResultRef, children_of, parents_of
from jobs.doors.intake import check_request, submit_request
from jobs.models import Job, JobLink, JobState
from jobs.queue import chains
from jobs.queue.admission import RequestInvalid
from jobs.queue.outcomes import fail, finish_done
from jobs.queue.services import job_cancel, job_hide, job_retry, job_submit
from jobs.tests.ui_fixtures import IMAGE, TTS, VIDEO, add_artifact

pytestmark = pytest.mark.django_db

VIDEO_FIELDS = {"model": VIDEO, "prompt": "the lighthouse, waves rolling", "size": "832x480", "seconds": 2}


def png(w: int = 300, h: int = 200, colour=(200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (w, h), colour).save(out, format="PNG")
    return out.getvalue()


def image_job(owner, device, prompt: str = "a lighthouse at dusk") -> Job:
    return job_submit(
        owner=owner,
        device=device,
        kind="image",
        model_id=IMAGE,
        params={"prompt": prompt, "size": "512x512", "n": 1, "steps": 8},
    )


def render(job: Job, media, data: bytes | None = None) -> Job:
    """The parent's run as the engine ends it: its result stored while collecting, then done."""
    Job.objects.filter(pk=job.pk).update(state=JobState.COLLECTING)
    add_artifact(job, media, kind="image", name="image-1.png", mime="image/png", data=data or png())
    job.refresh_from_db()
    assert finish_done(job)
    job.refresh_from_db()
    return job


def child_of(owner, device, parent: Job, **ref) -> Job:
    job, _admission = submit_request(
        owner=owner,
        device=device,
        kind="video",
        data=VIDEO_FIELDS,
        files={"start_image": ResultRef(parent.pk, **ref)},
    )
    return job


@pytest.fixture
def paused(device):
    device.queue_paused = True
    device.save(update_fields=["queue_paused"])
    return device


# -- at submit -------------------------------------------------------------------------------------------------
def test_a_child_of_a_job_not_rendered_yet_waits_and_says_for_which(paused, member):
    parent = image_job(member, paused)
    child = child_of(member, paused, parent)
    assert child.state == JobState.HELD and child.is_waiting and child.can_cancel
    first = child.events.get(seq=1)
    assert first.state == JobState.HELD
    assert first.message == f"Waits for job {parent.pk}, “a lighthouse at dusk”."
    assert [(link.job_id, link.field) for link in parents_of(child)] == [(parent.pk, "start_image")]
    assert [(link.job_id, link.field) for link in children_of(parent)] == [(child.pk, "start_image")]
    assert "start_image" not in (child.params.get("files") or {})


def test_a_job_one_may_not_see_reads_as_one_that_does_not_exist(paused, member, other_member):
    theirs = image_job(other_member, paused)
    with pytest.raises(RequestInvalid) as hidden:
        check_request(
            owner=member, device=paused, kind="video", data=VIDEO_FIELDS,
            files={"start_image": ResultRef(theirs.pk)},
        )  # fmt: skip
    with pytest.raises(RequestInvalid) as missing:
        check_request(
            owner=member, device=paused, kind="video", data=VIDEO_FIELDS,
            files={"start_image": ResultRef(theirs.pk + 1000)},
        )  # fmt: skip
    assert hidden.value.errors["start_image"][0].replace(str(theirs.pk), "N") == missing.value.errors[
        "start_image"
    ][0].replace(str(theirs.pk + 1000), "N")


def test_a_result_of_the_wrong_kind_is_refused_on_its_field(paused, member):
    speech = job_submit(
        owner=member,
        device=paused,
        kind="speech",
        model_id=TTS,
        params={"input": "hello", "voice": "serena", "response_format": "wav"},
    )
    with pytest.raises(RequestInvalid) as exc:
        check_request(
            owner=member,
            device=paused,
            kind="video",
            data=VIDEO_FIELDS,
            files={"start_image": ResultRef(speech.pk)},
        )
    assert "not a picture" in exc.value.errors["start_image"][0]


def test_a_cancelled_parent_or_a_missing_artifact_is_refused(paused, member, media):
    parent = image_job(member, paused)
    job_cancel(job=parent, by=member)
    with pytest.raises(RequestInvalid) as exc:
        child_of(member, paused, parent)
    assert "was cancelled" in exc.value.errors["start_image"][0]
    done = render(image_job(member, paused), media)
    with pytest.raises(RequestInvalid) as exc:
        child_of(member, paused, done, artifact="nope.png")
    assert "no picture named “nope.png”" in exc.value.errors["start_image"][0]


def test_job_submit_takes_a_reference_too(paused, member):
    parent = image_job(member, paused)
    child = job_submit(
        owner=member,
        device=paused,
        kind="video",
        model_id=VIDEO,
        params={"prompt": "x", "size": "832x480", "seconds": 2, "steps": 4},
        upload_files={"start_image": ResultRef(parent.pk)},
    )
    assert child.state == JobState.HELD
    with pytest.raises(ValidationError):
        job_submit(
            owner=member,
            device=paused,
            kind="video",
            model_id=VIDEO,
            params={"prompt": "x", "size": "832x480", "seconds": 2, "steps": 4},
            upload_files={"start_image": ResultRef(10**9)},
        )


# -- release ------------------------------------------------------------------------------------------------------
def test_the_parents_done_transaction_releases_the_child_with_its_picture_fitted_to_the_canvas(
    paused, member, media
):
    parent = image_job(member, paused)
    child = child_of(member, paused, parent)
    render(parent, media, png(300, 200))
    child.refresh_from_db()
    assert child.state == JobState.QUEUED
    stored = child.params["files"]["start_image"]
    with Image.open(media / stored) as im:
        assert im.size == (832, 480) and im.format == "PNG"
    link = JobLink.objects.get(child=child)
    assert link.released_at is not None and link.used == "image-1.png"
    assert "Ready: its input is here" in child.events.order_by("-seq").first().message


def test_a_child_of_a_finished_job_is_ready_at_once(paused, member, media):
    parent = render(image_job(member, paused), media)
    child = child_of(member, paused, parent)
    assert child.state == JobState.QUEUED
    assert child.params["files"]["start_image"].endswith("start_image.png")


def test_a_failed_parent_keeps_the_child_waiting_and_a_successful_retry_releases_it(paused, member, media):
    parent = image_job(member, paused)
    child = child_of(member, paused, parent)
    Job.objects.filter(pk=parent.pk).update(state=JobState.RUNNING)
    parent.refresh_from_db()
    assert fail(parent, None, human="The device ran out of memory.")
    child.refresh_from_db()
    assert child.state == JobState.HELD
    assert "failed (The device ran out of memory)" in child.events.order_by("-seq").first().message
    job_retry(job=parent, by=member)
    child.refresh_from_db()
    assert child.phase == f"Waits for job {parent.pk}, “a lighthouse at dusk”."
    render(parent, media)
    child.refresh_from_db()
    assert child.state == JobState.QUEUED


def test_cancelling_a_parent_cancels_the_chain_below_it(paused, member):
    from jobs.tests.ui_fixtures import make_job

    image = image_job(member, paused)
    video, second = child_of(member, paused, image), child_of(member, paused, image)
    # A third step waiting on the video (as an edit of a picture waits on its picture): the cascade goes down.
    below = make_job(member, paused, kind="mesh", state=JobState.HELD)
    JobLink.objects.create(child=below, parent=video, parent_number=video.pk, field="image")
    job_cancel(job=image, by=member)
    for job in (video, second, below):
        job.refresh_from_db()
        assert job.state == JobState.CANCELLED
    assert f"job {image.pk}, whose result it waited for, was cancelled" in video.cancel_reason
    assert f"Job {video.pk}, which it waited for, was cancelled" in below.cancel_reason


def test_a_deleted_parent_cancels_its_waiting_children(paused, member, media):
    parent = image_job(member, paused)
    child = child_of(member, paused, parent)
    Job.objects.filter(pk=parent.pk).update(state=JobState.FAILED)
    job_hide(job=parent, by=member)
    child.refresh_from_db()
    assert child.state == JobState.CANCELLED and "was deleted" in child.cancel_reason


def test_reconcile_releases_a_child_whose_parent_is_done_and_is_idempotent(paused, member, media):
    parent = image_job(member, paused)
    child = child_of(member, paused, parent)
    # As if the release had been lost: the parent done with its result, the child still held.
    Job.objects.filter(pk=parent.pk).update(state=JobState.DONE)
    add_artifact(parent, media, kind="image", name="image-1.png", mime="image/png", data=png())
    assert chains.release_ready() == 1
    assert chains.release_ready() == 0
    child.refresh_from_db()
    assert child.state == JobState.QUEUED
    assert child.events.filter(message__startswith="Ready").count() == 1


def test_a_cancelled_child_retried_waits_again(paused, member, media):
    parent = image_job(member, paused)
    child = child_of(member, paused, parent)
    job_cancel(job=child, by=member)
    job_retry(job=child, by=member)
    child.refresh_from_db()
    assert child.state == JobState.HELD
    render(parent, media)
    child.refresh_from_db()
    assert child.state == JobState.QUEUED


# -- the plan -------------------------------------------------------------------------------------------------------
def planned(device) -> dict[int, tuple]:
    from jobs.queue.eta import plan_device

    plan_device(device.pk)
    return {
        job.pk: (job.predicted_start, job.predicted_finish, job.plan_position)
        for job in Job.objects.filter(device=device)
    }


def test_a_child_is_planned_at_its_parents_finish_and_never_before(device, member):
    parent = image_job(member, device)
    child = child_of(member, device, parent)
    later = image_job(member, device, "a later picture")
    plan = planned(device)
    # Released at its parent's finish, the older child goes before the job queued after it, as dispatch will.
    assert plan[child.pk][0] == plan[parent.pk][1]
    assert plan[later.pk][0] == plan[child.pk][1]
    assert [plan[pk][2] for pk in (parent.pk, child.pk, later.pk)] == [1, 2, 3]


def test_the_device_fills_with_other_work_while_a_parent_renders_elsewhere(device, kitchen, member):
    from jobs.queue.eta import plan_device

    parent = image_job(member, kitchen)
    Job.objects.filter(pk=parent.pk).update(estimate_s=3600.0)  # an hour on the other device
    plan_device(kitchen.pk)
    parent.refresh_from_db()
    child = child_of(member, device, parent)
    other = job_submit(
        owner=member,
        device=device,
        kind="video",
        model_id=VIDEO,
        params={"prompt": "work meanwhile", "size": "832x480", "seconds": 2, "steps": 4},
    )
    plan = planned(device)
    assert plan[other.pk][0] < plan[child.pk][0]  # the ready job runs first, though queued after the child
    assert plan[child.pk][0] == parent.predicted_finish  # the child starts at its release, not before


def test_the_admission_of_a_child_counts_its_parents_finish(device, kitchen, member):
    from jobs.queue.eta import plan_device

    parent = image_job(member, kitchen)
    Job.objects.filter(pk=parent.pk).update(estimate_s=3600.0)
    plan_device(kitchen.pk)
    parent.refresh_from_db()
    checked = check_request(
        owner=member,
        device=device,
        kind="video",
        data=VIDEO_FIELDS,
        files={"start_image": ResultRef(parent.pk)},
    )
    assert checked.admission.starts_at == parent.predicted_finish
    assert checked.admission.ready_at > parent.predicted_finish


# -- REST --------------------------------------------------------------------------------------------------------
def test_rest_takes_a_result_as_a_file_field_and_names_parents_and_children(paused, member, client):
    import json

    client.force_login(member)
    parent = image_job(member, paused)
    body = {"kind": "video", "device": paused.pk, **VIDEO_FIELDS, "start_image": {"from_job": parent.pk}}
    answer = client.post("/api/jobs", data=json.dumps(body), content_type="application/json")
    assert answer.status_code == 201, answer.content
    got = answer.json()
    assert got["state"] == "held" and got["state_label"] == "Waits for another job"
    assert got["parents"] == [{"job": parent.pk, "field": "start_image", "artifact": "", "released": False}]
    assert got["estimate_starts_at"] is not None
    shown = client.get(f"/api/jobs/{parent.pk}").json()
    assert shown["children"] == [
        {"job": got["id"], "field": "start_image", "artifact": "", "released": False}
    ]
    listed = client.get("/api/jobs?state=waiting").json()
    assert got["id"] in [j["id"] for j in listed["items"]]


def test_rest_refuses_a_bad_reference_on_its_field(paused, member, client):
    import json

    client.force_login(member)
    for ref, words in (
        ({"from_job": "twelve"}, "must be a job's id"),
        ({"from_job": 10**9}, "There is no job"),
        ({"from_job": 1, "junk": 1}, "Unknown key"),
    ):
        body = {"kind": "video", "device": paused.pk, **VIDEO_FIELDS, "start_image": ref}
        answer = client.post("/api/jobs", data=json.dumps(body), content_type="application/json")
        assert answer.status_code == 422, answer.content
        assert words in json.dumps(answer.json()), answer.json()


def test_v1_takes_a_result_through_extra_body(paused, member):
    import json

    from jobs.tests.doors.test_v1 import api

    parent = image_job(member, paused)
    client = api(member)
    body = {"model": VIDEO, "prompt": "the lighthouse, animated", "size": "832x480", "seconds": 2,
            "device": paused.pk, "input_reference": {"from_job": parent.pk}}  # fmt: skip
    answer = client.post("/v1/videos", data=json.dumps(body), content_type="application/json")
    assert answer.status_code == 200, answer.content
    child = Job.objects.get(pk=int(answer.json()["id"].removeprefix("video_")))
    assert child.state == JobState.HELD and answer.json()["status"] == "queued"
    body["input_reference"] = {"from_job": 10**9}
    refused = client.post("/v1/videos", data=json.dumps(body), content_type="application/json")
    assert refused.status_code == 400 and "There is no job" in refused.json()["error"]["message"]


# -- a chain in one go --------------------------------------------------------------------------------------------
IMAGE_FIELDS = {"model": IMAGE, "prompt": "a lighthouse at dusk", "size": "512x512", "steps": 8}
MESH_FIELDS = {"model": "tencent/Hunyuan3D-2.1"}


def three_steps(device):
    from jobs.doors.chaining import ChainStep, StepRef

    return [
        ChainStep("image", IMAGE_FIELDS, device=device),
        ChainStep("video", VIDEO_FIELDS, {"start_image": StepRef(0)}, device=device),
        ChainStep("mesh", MESH_FIELDS, {"image": StepRef(0)}, device=device),
    ]


def test_a_chain_is_queued_in_one_go_and_says_when_its_last_step_is_expected(device, member):
    from jobs.doors.chaining import submit_chain

    queued = submit_chain(owner=member, steps=three_steps(device), idempotency_key="k1")
    image, video, mesh = queued.jobs
    assert [j.state for j in queued.jobs] == [JobState.QUEUED, JobState.HELD, JobState.HELD]
    assert [(link.job_id, link.field) for link in parents_of(video)] == [(image.pk, "start_image")]
    assert [(link.job_id, link.field) for link in parents_of(mesh)] == [(image.pk, "image")]
    # Each step is planned after the image it takes; the last expected is what the form says.
    assert queued.admissions[1].starts_at >= queued.admissions[0].ready_at
    assert queued.admissions[2].starts_at >= queued.admissions[0].ready_at
    assert queued.ready_at == queued.admissions[-1].ready_at
    again = submit_chain(owner=member, steps=three_steps(device), idempotency_key="k1")
    assert [j.pk for j in again.jobs] == [j.pk for j in queued.jobs]
    assert Job.objects.count() == 3


def test_a_chain_over_a_quota_queues_nothing_and_names_the_step(device, member):
    from jobs.doors.chaining import ChainRefused, submit_chain
    from jobs.models import HouseholdQuota

    HouseholdQuota.objects.update_or_create(pk=1, defaults={"max_queued": 2})
    with pytest.raises(ChainRefused) as exc:
        submit_chain(owner=member, steps=three_steps(device))
    assert exc.value.step == 2 and exc.value.summary().startswith("Step 3:")
    assert not Job.objects.exists() and not JobLink.objects.exists()


def test_a_step_may_only_use_an_earlier_steps_result(device, member):
    from jobs.doors.chaining import ChainRefused, ChainStep, StepRef, submit_chain

    steps = [ChainStep("video", VIDEO_FIELDS, {"start_image": StepRef(0)}, device=device)]
    with pytest.raises(ChainRefused) as exc:
        submit_chain(owner=member, steps=steps)
    assert "earlier step" in exc.value.errors["start_image"][0]


# -- the pages show a held job ------------------------------------------------------------------------------------
def test_the_pages_show_a_held_job_and_where_it_waits(device, member, client):
    from django.urls import reverse

    from jobs.queue.eta import plan_device

    client.force_login(member)
    parent = image_job(member, device)
    child = child_of(member, device, parent)
    plan_device(device.pk)
    page = client.get(reverse("jobs-detail", args=[child.pk]))
    assert page.status_code == 200
    assert (
        "Waits for another job" in page.content.decode()
        and f"Waits for job {parent.pk}" in page.content.decode()
    )
    queue = client.get(reverse("jobs-queue"))
    assert (
        queue.status_code == 200
        and f"waits for the result of job {parent.pk}" in queue.content.decode().lower()
    )
    gallery = client.get(reverse("jobs-gallery") + "?state=waiting")
    assert gallery.status_code == 200 and f"/jobs/{child.pk}/" in gallery.content.decode()


def test_deleting_a_parents_results_cancels_a_child_still_waiting_for_them(paused, member, media):
    from jobs.quotas.services import results_delete

    parent = image_job(member, paused)
    child = child_of(member, paused, parent)
    Job.objects.filter(pk=parent.pk).update(state=JobState.DONE)  # as if its release had not run yet
    add_artifact(parent, media, kind="image", name="image-1.png", mime="image/png", data=png())
    parent.refresh_from_db()
    results_delete(job=parent, by=member)
    child.refresh_from_db()
    assert child.state == JobState.CANCELLED and "were deleted" in child.cancel_reason


def test_a_result_the_child_cannot_use_cancels_it_with_the_reason(paused, member, media):
    parent = image_job(member, paused)
    child = child_of(member, paused, parent)
    render(parent, media, b"\x89PNG\r\n\x1a\n but cut short")
    parent.refresh_from_db()
    child.refresh_from_db()
    assert parent.state == JobState.DONE  # the parent's end stands whatever its children make of it
    assert child.state == JobState.CANCELLED and "image-1.png" in child.cancel_reason


def test_a_shared_result_may_be_used_and_its_user_stays_private(paused, member, other_member, admin_user):
    from jobs.core.selectors import job_links
    from jobs.queue.services import job_set_shared

    parent = image_job(member, paused)
    job_set_shared(job=parent, by=member, shared=True)
    theirs = child_of(other_member, paused, parent)
    assert theirs.state == JobState.HELD
    assert job_links(member, parent) == ([], [])  # another person's private job is not named to the owner
    assert [c.job_id for c in job_links(admin_user, parent)[1]] == [theirs.pk]
    assert [p.job_id for p in job_links(other_member, theirs)[0]] == [parent.pk]
