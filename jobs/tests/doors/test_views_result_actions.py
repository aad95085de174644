"""Results that feed the next render, on the pages: a result's actions (job page, gallery), the form filled in
from a result, and "then …" steps queued with a job in one go (``jobs.doors.result_actions``)."""

from __future__ import annotations

import datetime as dt
import html as htmllib
import re

import pytest
from django.utils import timezone

from devices.capabilities import Capabilities, ModelCap, TensorSharpCap
from devices.models import Device
from jobs.doors.stash import new_submit_token
from jobs.models import Job, JobLink, JobState
from jobs.tests.ui_fixtures import IMAGE, PNG, add_artifact, capabilities, make_job

pytestmark = pytest.mark.django_db

EDIT = "qwen-image-edit.gguf"
CLONE = "Qwen/Qwen3-TTS-12Hz-1.7B-Base"


def done_image(owner, device, media, **fields):
    job = make_job(owner, device, kind="image", state="done", prompt="a lighthouse at dusk", **fields)
    add_artifact(job, media, kind="image", name="image-1.png", mime="image/png", data=PNG)
    add_artifact(job, media, kind="thumb", name="thumb.png", mime="image/png", data=PNG)
    return job


def page(client, url) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


@pytest.fixture
def ts(db):
    caps = Capabilities(
        kind="tensorsharp",
        models=[ModelCap(EDIT, "Qwen-Image-Edit", "image_edit", loaded=True)],
        tensorsharp=TensorSharpCap(architecture="qwen-image", loaded=EDIT),
    )
    return Device.objects.create(
        name="Attic",
        kind="tensorsharp",
        base_url="http://127.0.0.1:2",
        state="online",
        capabilities=caps.to_dict(),
    )


def image_post(device, **over):
    data = {
        "device": device.pk,
        "kind": "image",
        "model": IMAGE,
        "prompt": "a lighthouse at dusk",
        "width": "512",
        "height": "512",
        "n": "1",
        "steps": "8",
        "when": "asap",
        "polite": "on",
    }
    data.update(over)
    return data


# -- which actions a result has --------------------------------------------------------------------------------
def test_a_finished_picture_offers_animate_and_3d_where_a_device_can(member_client, member, device, media):
    job = done_image(member, device, media)
    html = page(member_client, f"/jobs/{job.pk}/")
    assert f'id="job-{job.pk}-animate"' in html and f'id="job-{job.pk}-mesh"' in html
    assert f"start_image_from={job.pk}" in html and f"image_from={job.pk}" in html
    # No device edits pictures and a picture is no voice: neither is offered.
    assert f'id="job-{job.pk}-edit"' not in html and f'id="job-{job.pk}-voice"' not in html
    assert 'id="job-again"' in html  # "Run again" stays


def test_edit_is_offered_on_the_device_that_edits(member_client, member, device, ts, media):
    job = done_image(member, device, media)
    html = htmllib.unescape(page(member_client, f"/jobs/{job.pk}/"))
    assert f'id="job-{job.pk}-edit"' in html
    assert f"kind=image&image_from={job.pk}&device={ts.pk}" in html  # only Attic edits: the form is Attic's


def test_no_action_on_a_result_not_finished_nor_on_a_video(member_client, member, device, media):
    running = make_job(member, device, kind="image", state="running")
    video = make_job(member, device, kind="video", state="done")
    for job in (running, video):
        html = page(member_client, f"/jobs/{job.pk}/")
        assert 'class="result-actions"' not in html


def test_use_this_voice_needs_a_cloning_model(member_client, member, device, media):
    speech = make_job(member, device, kind="speech", state="done")
    add_artifact(speech, media, kind="audio", name="speech.wav", mime="audio/wav", data=b"RIFF0000WAVE")
    assert f'id="job-{speech.pk}-voice"' not in page(member_client, f"/jobs/{speech.pk}/")
    caps = capabilities()
    caps["models"].append({"id": CLONE, "name": "Qwen3-TTS Base", "kind": "tts", "loaded": False})
    Device.objects.filter(pk=device.pk).update(capabilities=Capabilities.from_dict(caps).to_dict())
    html = htmllib.unescape(page(member_client, f"/jobs/{speech.pk}/"))
    assert f'id="job-{speech.pk}-voice"' in html
    assert f"ref_audio_from={speech.pk}" in html and "model=Qwen%2FQwen3-TTS-12Hz-1.7B-Base" in html


def test_use_this_voice_fills_in_what_the_recording_says(member_client, member, device, media):
    speech = make_job(member, device, kind="speech", state="done", prompt="hello from the kitchen")
    add_artifact(speech, media, kind="audio", name="speech.wav", mime="audio/wav", data=b"RIFF0000WAVE")
    caps = capabilities()
    caps["models"].append({"id": CLONE, "name": "Qwen3-TTS Base", "kind": "tts", "loaded": False})
    Device.objects.filter(pk=device.pk).update(capabilities=Capabilities.from_dict(caps).to_dict())
    html = page(member_client, f"/jobs/new/?kind=speech&ref_audio_from={speech.pk}&model={CLONE}")
    field = re.search(r'<(?:input|textarea)[^>]*name="ref_text"[^>]*>([^<]*)', html)
    assert field and "hello from the kitchen" in field.group(0) + field.group(1)


def test_a_viewer_has_no_actions(viewer_client, member, device, media):
    job = done_image(member, device, media, shared=True)
    html = page(viewer_client, f"/jobs/{job.pk}/")
    assert 'class="result-actions"' not in html and "start_image_from" not in html
    assert "start_image_from" not in page(viewer_client, "/jobs/")


def test_the_gallery_card_offers_the_actions(member_client, member, device, media):
    job = done_image(member, device, media)
    html = page(member_client, "/jobs/")
    assert f"start_image_from={job.pk}" in html and ">Make 3D<" in html


# -- the form filled in from a result -----------------------------------------------------------------------------
def test_animate_opens_the_video_form_with_the_picture_not_an_upload(member_client, member, device, media):
    job = done_image(member, device, media)
    html = page(member_client, f"/jobs/new/?kind=video&start_image_from={job.pk}")
    assert f'name="start_image_from" value="{job.pk}"' in html
    assert 'type="file" name="start_image"' not in html
    assert "a lighthouse at dusk" in html and f"/jobs/{job.pk}/files/" in html  # its title and thumbnail


def test_another_persons_private_result_is_not_found(member_client, other_member, device, media):
    theirs = done_image(other_member, device, media)
    for url in (
        f"/jobs/new/?kind=video&start_image_from={theirs.pk}",
        f"/jobs/new/?kind=video&start_image_from={theirs.pk + 1000}",
        "/jobs/new/?kind=video&start_image_from=nonsense",
    ):
        assert member_client.get(url).status_code == 404
    post = {"device": device.pk, "kind": "video", "prompt": "x", "start_image_from": str(theirs.pk)}
    assert member_client.post("/jobs/new/", post).status_code == 404
    assert not Job.objects.filter(owner__username="member").exists() or not JobLink.objects.exists()


def test_a_shared_result_can_be_used(member_client, other_member, device, media):
    theirs = done_image(other_member, device, media, shared=True)
    html = page(member_client, f"/jobs/new/?kind=mesh&image_from={theirs.pk}")
    assert f'name="image_from" value="{theirs.pk}"' in html


def test_the_form_queues_a_job_that_waits_for_a_result_not_done(member_client, member, device):
    parent = make_job(member, device, kind="image", state="queued", prompt="a kite")
    post = {"device": device.pk, "kind": "mesh", "model": "tencent/Hunyuan3D-2.1", "when": "asap",
            "simplify": "on", "texture": "on", "image_from": str(parent.pk)}  # fmt: skip
    response = member_client.post("/jobs/new/", post)
    child = Job.objects.exclude(pk=parent.pk).get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{child.pk}/"
    assert child.state == JobState.HELD and child.kind == "mesh"
    assert list(JobLink.objects.values_list("parent_id", "child_id", "field")) == [
        (parent.pk, child.pk, "image")
    ]
    html = page(member_client, f"/jobs/{parent.pk}/")
    assert f"/jobs/{child.pk}/" in html and "Waits for this one</span>" in html
    assert (
        "Waits for another job" not in html
    )  # the child's own label, beside "waits for this one", read twice
    html = page(member_client, f"/jobs/{child.pk}/")
    assert "Made from" in html and "Waits for job" in html


# -- "then …" steps ---------------------------------------------------------------------------------------------
def test_the_image_form_offers_then_steps(member_client, device):
    html = page(member_client, f"/jobs/new/?device={device.pk}&kind=image")
    assert 'name="then_animate"' in html and 'name="then_mesh"' in html
    assert 'name="then_animate"' not in page(member_client, f"/jobs/new/?device={device.pk}&kind=video")


def test_a_chain_from_the_form_queues_three_linked_jobs(member_client, member, device):
    post = image_post(device, then_animate="1", then_animate_prompt="the waves move", then_animate_seconds="3",
                      then_mesh="1", submit_token=new_submit_token())  # fmt: skip
    response = member_client.post("/jobs/new/", post)
    image, video, mesh = Job.objects.order_by("pk")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{image.pk}/"
    assert (image.kind, video.kind, mesh.kind) == ("image", "video", "mesh")
    assert video.state == mesh.state == JobState.HELD and video.params["seconds"] == 3
    assert video.prompt == "the waves move"
    links = set(JobLink.objects.values_list("parent_id", "child_id", "field"))
    assert links == {(image.pk, video.pk, "start_image"), (image.pk, mesh.pk, "image")}
    html = page(member_client, f"/jobs/{image.pk}/")
    assert "Then:" in html and f"/jobs/{video.pk}/" in html and f"/jobs/{mesh.pk}/" in html
    # The same form sent again queues nothing new.
    again = member_client.post("/jobs/new/", post)
    assert again.status_code == 302 and Job.objects.count() == 3


def test_a_refused_step_is_named_and_nothing_is_queued(member_client, device):
    post = image_post(device, then_animate="1", then_animate_seconds="30")
    response = member_client.post("/jobs/new/", post)
    html = htmllib.unescape(response.content.decode())
    assert response.status_code == 400 and Job.objects.count() == 0
    assert "Step 2, then animate it — Length:" in html
    assert 'name="then_animate" value="1" id="then-animate" checked' in html  # what was ticked stays


def test_the_summary_says_when_the_last_step_is_ready(member_client, device):
    post = image_post(device, then_animate="1", then_mesh="1")
    response = member_client.post("/jobs/new/admission/", post, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200 and 'id="admission-chain"' in html
    assert "3 jobs, one after the other" in html and "the last ready" in html
    refused = member_client.post(
        "/jobs/new/admission/", image_post(device, then_animate="1", then_animate_seconds="30"),
        HTTP_HX_REQUEST="true",
    )  # fmt: skip
    assert "Step 2, then animate it" in refused.content.decode()


@pytest.mark.parametrize("pool", [False, True])
def test_the_summary_of_a_form_from_a_result_counts_its_parent(member_client, member, device, kitchen, pool):
    finish = timezone.now() + dt.timedelta(hours=3)
    parent = make_job(member, device, kind="image", state="queued", predicted_finish=finish)
    post = {"device": "any" if pool else device.pk, "kind": "mesh", "model": "tencent/Hunyuan3D-2.1",
            "when": "asap", "image_from": str(parent.pk)}  # fmt: skip
    response = member_client.post("/jobs/new/admission/", post, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    starts = re.search(r'starts ≈ <time datetime="([^"]+)"', html)
    assert response.status_code == 200 and starts, html[:800]
    assert dt.datetime.fromisoformat(starts.group(1).replace("Z", "+00:00")) >= finish.replace(
        second=0, microsecond=0
    )  # it starts once the picture it takes is there


def test_the_gallery_reads_the_devices_once_for_every_card(
    member_client, member, device, media, django_assert_max_num_queries
):
    for _ in range(12):
        done_image(member, device, media)
    with django_assert_max_num_queries(9):  # the gallery's 8, and the devices once: flat in the cards
        html = member_client.get("/jobs/").content.decode()
    assert html.count(">Animate<") == 12


def test_an_end_frame_is_offered_where_a_video_model_takes_one(member_client, member, device, media):
    job = done_image(member, device, media)
    assert f'id="job-{job.pk}-animate_to"' not in page(
        member_client, f"/jobs/{job.pk}/"
    )  # a Tiiny takes none
    caps = Capabilities(
        kind="tensorsharp",
        models=[ModelCap("wan.gguf", "wan.gguf", "video", loaded=True)],
        tensorsharp=TensorSharpCap(
            architecture="wan", loaded="wan.gguf", frame_grid="4k+1", fps=16,
            video={"supportsImageConditioning": True, "supportsEndImageConditioning": True},
        ),
    )  # fmt: skip
    attic = Device.objects.create(
        name="Attic",
        kind="tensorsharp",
        base_url="http://127.0.0.1:2",
        state="online",
        capabilities=caps.to_dict(),
    )
    html = htmllib.unescape(page(member_client, f"/jobs/{job.pk}/"))
    assert f"kind=video&end_image_from={job.pk}&device={attic.pk}" in html
    form = page(member_client, f"/jobs/new/?kind=video&end_image_from={job.pk}&device={attic.pk}")
    assert f'name="end_image_from" value="{job.pk}"' in form and 'value="fl2v" selected' in form
    assert 'type="file" name="start_image"' in form  # the start frame is still an upload


def test_a_held_jobs_pushed_status_says_what_it_waits_for_then_that_it_queued(member, device):
    from jobs.core.transitions import job_transition
    from jobs.live.fragments import job_with_related, render_status

    parent = make_job(member, device, kind="image", state="running", prompt="a kite")
    child = make_job(member, device, kind="mesh", state="held", phase=f"Waits for job {parent.pk}, “a kite”.")
    assert f"Waits for job {parent.pk}" in render_status(job_with_related(child.pk))
    assert job_transition(child.pk, from_states=["held"], to="queued", message="Ready.", phase="Waiting")
    html = render_status(job_with_related(child.pk))
    assert 'hx-swap-oob="true"' in html and 'data-state="queued"' in html and "Waiting in the queue" in html


def test_a_batch_with_then_steps_is_refused_not_queued_without_them(member_client, device):
    post = image_post(device, then_animate="1", batch_mode="seeds", batch_count="3")
    response = member_client.post("/jobs/new/", post)
    assert response.status_code == 400 and Job.objects.count() == 0
    assert "A batch can't take another job's result" in htmllib.unescape(response.content.decode())


def test_the_job_page_asks_for_its_actions_again_when_its_state_changes(member_client, member, device, media):
    job = make_job(member, device, kind="image", state="running")
    html = page(member_client, f"/jobs/{job.pk}/")
    assert f'hx-get="/jobs/{job.pk}/next/"' in html and f'id="job-{job.pk}-next"' in html
    Job.objects.filter(pk=job.pk).update(state="done")
    add_artifact(job, media, kind="image", name="image-1.png", mime="image/png", data=PNG)
    box = page(member_client, f"/jobs/{job.pk}/next/")
    assert f'id="job-{job.pk}-animate"' in box and " hidden" not in box.split(">", 1)[0]


def test_a_result_that_cant_be_used_is_said_on_its_field(member_client, member, device, media):
    cancelled = make_job(member, device, kind="image", state="cancelled", prompt="a kite")
    post = {"device": device.pk, "kind": "mesh", "model": "tencent/Hunyuan3D-2.1", "when": "asap",
            "image_from": str(cancelled.pk)}  # fmt: skip
    response = member_client.post("/jobs/new/", post)
    html = htmllib.unescape(response.content.decode())
    assert response.status_code == 400 and Job.objects.count() == 1
    assert f"Job {cancelled.pk} was cancelled" in html and "A picture is required" not in html
    assert f'name="image_from" value="{cancelled.pk}"' in html  # the form keeps it, to be changed
