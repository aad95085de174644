from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from jobs.models import Job
from jobs.tests.ui_fixtures import MESH, MUSIC, PNG, TTS, VIDEO

pytestmark = pytest.mark.django_db


def video_post(device, **over):
    data = {
        "device": device.pk,
        "kind": "video",
        "model": VIDEO,
        "prompt": "a fox in the snow",
        "size": "832x480",
        "seconds": "2",
        "steps": "4",
        "when": "asap",
        "polite": "on",
    }
    data.update(over)
    return data


def test_it_offers_a_form_per_kind_built_from_the_device(member_client, device):
    html = member_client.get("/jobs/new/").content.decode()
    assert 'name="prompt"' in html and 'value="832x480"' in html and 'value="1344x768"' in html
    for kind in ("video", "mesh", "music", "image", "speech"):
        assert f"kind={kind}" in html
    assert 'for="id_prompt"' in html and 'hx-post="/jobs/new/admission/"' in html
    assert f'id="device-{device.pk}-queue"' in html


def test_it_offers_voices_for_the_speech_model(member_client, device):
    html = member_client.get(f"/jobs/new/?device={device.pk}&kind=speech").content.decode()
    assert '<datalist id="voice-list">' in html and 'value="serena"' in html


def test_it_asks_for_a_picture_with_a_preview_for_3d(member_client, device):
    html = member_client.get(f"/jobs/new/?device={device.pk}&kind=mesh").content.decode()
    assert 'type="file" name="image"' in html and 'data-preview="preview-image"' in html


def test_it_queues_a_video_and_goes_to_its_page(member_client, member, device):
    response = member_client.post("/jobs/new/", video_post(device))
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.owner == member and job.params["size"] == "832x480" and job.prompt == "a fox in the snow"
    assert not job.shared


def test_it_queues_a_3d_job_with_its_picture(member_client, device, media):
    data = {
        "device": device.pk,
        "kind": "mesh",
        "model": MESH,
        "when": "asap",
        "simplify": "on",
        "texture": "on",
        "image": SimpleUploadedFile("obj.png", PNG, "image/png"),
    }
    response = member_client.post("/jobs/new/", data)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert Job.objects.get().kind == "mesh"


def test_it_keeps_what_was_typed_when_something_is_wrong(member_client, device):
    response = member_client.post("/jobs/new/", video_post(device, seconds="9", prompt="keep this prompt"))
    html = response.content.decode()
    assert response.status_code == 400
    assert "keep this prompt" in html and "The device renders 1 to 7 seconds" in html
    assert Job.objects.count() == 0


def test_it_refuses_a_size_the_model_does_not_render(member_client, device):
    response = member_client.post("/jobs/new/", video_post(device, size="640x640"))
    assert response.status_code == 400 and Job.objects.count() == 0
    assert "This model only renders 1344x768, 768x1344, 832x480, 480x832." in response.content.decode()


def test_it_wants_a_time_for_not_before(member_client, device):
    response = member_client.post("/jobs/new/", video_post(device, when="not_before"))
    assert response.status_code == 400 and "Give the time the job may start." in response.content.decode()


def test_it_summarises_admission_as_fields_change(member_client, device):
    response = member_client.post("/jobs/new/admission/", video_post(device), HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200 and 'id="admission"' in html
    assert "≈" in html and "starts ≈" in html and "ready ≈" in html


def test_it_says_what_is_missing_before_it_can_estimate(member_client, device):
    response = member_client.post(
        "/jobs/new/admission/", video_post(device, prompt=""), HTTP_HX_REQUEST="true"
    )
    assert "Fill in prompt" in response.content.decode()


def test_it_refuses_renders_over_55_minutes(member_client, device):
    data = video_post(device, size="1344x768", seconds="7", steps="8")
    html = member_client.post("/jobs/new/admission/", data, HTTP_HX_REQUEST="true").content.decode()
    assert "Too long for the device" in html
    response = member_client.post("/jobs/new/", data)
    assert response.status_code == 400 and Job.objects.count() == 0


def test_it_sends_the_dependent_fields_when_the_model_changes(member_client, device):
    data = {"device": device.pk, "kind": "speech", "model": TTS, "input": "", "when": "asap"}
    response = member_client.post(
        "/jobs/new/admission/", data, HTTP_HX_REQUEST="true", HTTP_HX_TRIGGER_NAME="model"
    )
    html = response.content.decode()
    assert 'id="job-fields" class="job-fields" hx-swap-oob="true"' in html and "serena" in html


def test_it_tells_viewers_they_cannot_submit(viewer_client, device):
    page = viewer_client.get("/jobs/new/")
    assert (
        page.status_code == 200
        and b"You can watch, not queue" in page.content
        and b'name="prompt"' not in page.content
    )
    assert viewer_client.post("/jobs/new/", video_post(device)).status_code == 403
    assert Job.objects.count() == 0
    assert viewer_client.post("/jobs/new/admission/", video_post(device)).status_code == 403


def test_it_explains_when_there_is_no_device(member_client):
    assert b"No device yet" in member_client.get("/jobs/new/").content


def test_it_shows_the_music_fields_of_the_chosen_model(member_client, device):

    html = member_client.get(f"/jobs/new/?device={device.pk}&kind=music").content.decode()
    assert 'name="prompt"' in html and 'name="lyrics"' not in html  # Foundation-1 makes loops
    assert MUSIC in html


def test_it_leaves_out_voice_cloning_fields_for_a_preset_voice_model(member_client, device):
    html = member_client.get(f"/jobs/new/?device={device.pk}&kind=speech").content.decode()
    assert 'name="ref_audio"' not in html and 'name="instruct"' not in html and 'name="input"' in html
