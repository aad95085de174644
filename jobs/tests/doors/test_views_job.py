from __future__ import annotations

import pytest
from django.test import Client

from jobs.models import Bookmark, Job
from jobs.tests.ui_fixtures import PNG, add_artifact, make_job

pytestmark = pytest.mark.django_db


# -- access -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "who,status",
    [("member_client", 200), ("admin_client", 200), ("other_client", 404), ("viewer_client", 404)],
)
def test_it_shows_a_private_job_only_to_its_owner_and_admins(request, member, device, who, status):
    job = make_job(member, device, prompt="a private fox")
    response = request.getfixturevalue(who).get(f"/jobs/{job.pk}/")
    assert response.status_code == status
    if status == 404:
        assert b"a private fox" not in response.content and b"Nothing here" in response.content


def test_it_shows_a_shared_job_to_everyone_signed_in(other_client, viewer_client, member, device):
    job = make_job(member, device, shared=True)
    assert other_client.get(f"/jobs/{job.pk}/").status_code == 200
    assert viewer_client.get(f"/jobs/{job.pk}/").status_code == 200
    assert Client().get(f"/jobs/{job.pk}/").status_code == 302


def test_it_shows_live_status_events_and_settings(member_client, member, device):
    job = make_job(member, device, state="running")
    html = member_client.get(f"/jobs/{job.pk}/").content.decode()
    assert f'ws-connect="/ws/hub/?watch=job:{job.pk}"' in html
    for part in ("status", "events", "result", "actions"):
        assert f'id="job-{job.pk}-{part}"' in html
    assert 'value="37"' in html and "Rendering step 3 of 4" in html and "832x480" in html
    assert "Cancel the job" in html


def test_it_plays_a_finished_video_with_its_soundtrack(member_client, member, device, media):
    job = make_job(member, device, state="done")
    add_artifact(job, media)
    add_artifact(job, media, kind="sidecar", name="audio.wav", mime="audio/wav", data=b"RIFF0000WAVE")
    html = member_client.get(f"/jobs/{job.pk}/").content.decode()
    assert f'<video class="player" id="job-{job.pk}-video" controls' in html
    assert "data-sync-with" in html and "audio.wav" in html and "?download=1" in html


def test_it_shows_a_glb_in_model_viewer(member_client, member, device, media):
    job = make_job(member, device, kind="mesh", state="done")
    add_artifact(job, media, kind="mesh", name="model.glb", mime="model/gltf-binary", data=b"glTF")
    html = member_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "<model-viewer" in html and "vendor/model-viewer/model-viewer.min.js" in html


def test_it_shows_audio_and_images(member_client, member, device, media):
    speech = make_job(member, device, kind="speech", state="done")
    add_artifact(speech, media, kind="audio", name="speech.wav", mime="audio/wav", data=b"RIFF0000WAVE")
    image = make_job(member, device, kind="image", state="done")
    add_artifact(image, media, kind="image", name="image-1.png", mime="image/png", data=PNG)
    assert '<audio class="player-audio"' in member_client.get(f"/jobs/{speech.pk}/").content.decode()
    assert '<img class="result-image"' in member_client.get(f"/jobs/{image.pk}/").content.decode()


def test_it_explains_a_failure(member_client, member, device):
    job = make_job(member, device, state="failed", error_human="The device was locked.", error_detail="502")
    html = member_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "The device was locked." in html and "Try again" in html and "What the device said" in html


def test_it_serves_files_only_to_people_who_may_see_the_job(
    member_client, other_client, member, device, media
):
    job = make_job(member, device, state="done")
    art = add_artifact(job, media)
    assert member_client.get(f"/jobs/{job.pk}/files/{art.pk}/").status_code == 200
    assert other_client.get(f"/jobs/{job.pk}/files/{art.pk}/").status_code == 404
    download = member_client.get(f"/jobs/{job.pk}/files/{art.pk}/?download=1")
    assert "attachment" in download["Content-Disposition"]


# -- partials ------------------------------------------------------------------------------------------------
def test_it_renders_the_npu_timeline(member_client, member, device):
    job = make_job(member, device, state="running")
    response = member_client.get(f"/jobs/{job.pk}/npu/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and f'id="job-{job.pk}-npu"' in response.content.decode()


def test_it_renders_out_of_band_fragments_for_the_socket(member, device):
    from jobs.live.fragments import job_page_fragments, job_with_related, queue_fragments, render_job_row

    job = make_job(member, device, state="running", prompt="a fox")
    full = job_with_related(job.pk)  # what the pushes send: the job page's elements and the owner's list row
    html = [*job_page_fragments(full, viewer=member, with_player=True), render_job_row(full)]
    ids = [f'id="job-{job.pk}-{p}"' for p in ("status", "events", "result", "row")]
    assert all(any(i in h for h in html) for i in ids)
    assert all('hx-swap-oob="true"' in h for h in html)
    queue = queue_fragments(device)
    assert any(f'id="device-{device.pk}-running"' in h for h in queue)
    assert any(f'id="device-{device.pk}-queue"' in h for h in queue)
    assert not any("a fox" in h for h in queue)  # private: only "Video by mia" goes to everyone


# -- actions -------------------------------------------------------------------------------------------------
def test_it_cancels_after_asking(member_client, member, device):
    job = make_job(member, device)
    page = member_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "data-confirm=" in page
    response = member_client.post(f"/jobs/{job.pk}/cancel/", {"reason": "changed my mind"})
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    job.refresh_from_db()
    assert job.state == "cancelled" and job.cancel_reason == "changed my mind"


@pytest.mark.parametrize("who,status", [("other_client", 404), ("viewer_client", 404)])
def test_it_refuses_cancel_from_strangers(request, member, device, who, status):
    job = make_job(member, device)
    assert request.getfixturevalue(who).post(f"/jobs/{job.pk}/cancel/").status_code == status
    job.refresh_from_db()
    assert job.state == "queued"


def test_it_lets_others_look_at_a_shared_job_but_not_cancel_it(other_client, member, device):
    job = make_job(member, device, shared=True)
    assert "Cancel the job" not in other_client.get(f"/jobs/{job.pk}/").content.decode()
    assert other_client.post(f"/jobs/{job.pk}/cancel/").status_code == 403


def test_it_lets_an_admin_cancel_anyones_job_with_a_reason(admin_client, member, device):
    job = make_job(member, device)
    admin_client.post(f"/jobs/{job.pk}/cancel/", {"reason": "device needed", "next": "/jobs/queue/"})
    job.refresh_from_db()
    assert job.state == "cancelled" and job.cancel_reason == "device needed"


def test_it_says_so_when_cancelling_a_finished_job(member_client, member, device):
    job = make_job(member, device, state="done")
    response = member_client.post(f"/jobs/{job.pk}/cancel/", follow=True)
    assert "already finished" in response.content.decode()


def test_it_retries_a_failed_job(member_client, member, device):
    job = make_job(member, device, state="failed")
    response = member_client.post(f"/jobs/{job.pk}/retry/")
    assert response.status_code == 302
    job.refresh_from_db()
    assert job.state == "queued"


def test_it_shares_and_unshares(member_client, member, device):
    job = make_job(member, device)
    response = member_client.post(f"/jobs/{job.pk}/share/", {"shared": "1"}, HTTP_HX_REQUEST="true")
    assert "Make private" in response.content.decode()
    job.refresh_from_db()
    assert job.shared


def test_it_creates_and_revokes_a_read_only_link(member_client, member, device, media):
    job = make_job(member, device, state="done", prompt="fox on the link")
    art = add_artifact(job, media)
    member_client.post(f"/jobs/{job.pk}/share-link/", {"enable": "1"})
    job.refresh_from_db()
    token = job.share_token
    assert token
    anon = Client()
    public = anon.get(f"/jobs/shared/{token}/")
    assert (
        public.status_code == 200 and b"fox on the link" in public.content and b"Cancel" not in public.content
    )
    assert anon.get(f"/jobs/shared/{token}/files/{art.pk}/").status_code == 200
    member_client.post(f"/jobs/{job.pk}/share-link/", {"enable": "0"})
    assert anon.get(f"/jobs/shared/{token}/").status_code == 404
    assert anon.get(f"/jobs/shared/{token}/files/{art.pk}/").status_code == 404


def test_it_refuses_share_changes_from_others(other_client, member, device):
    job = make_job(member, device, shared=True)
    assert other_client.post(f"/jobs/{job.pk}/share-link/", {"enable": "1"}).status_code == 403
    job.refresh_from_db()
    assert job.share_token == ""


def test_it_bookmarks(member_client, member, device):
    job = make_job(member, device)
    response = member_client.post(f"/jobs/{job.pk}/bookmark/", HTTP_HX_REQUEST="true")
    assert "Bookmarked" in response.content.decode()
    assert Bookmark.objects.filter(user=member, job=job).exists()
    member_client.post(f"/jobs/{job.pk}/bookmark/", HTTP_HX_REQUEST="true")
    assert not Bookmark.objects.filter(user=member, job=job).exists()


def test_it_refuses_bookmarks_on_jobs_you_cannot_see(other_client, member, device):
    job = make_job(member, device)
    assert other_client.post(f"/jobs/{job.pk}/bookmark/").status_code == 404


def test_it_prefills_run_again_and_queues_a_new_job(member_client, member, device):
    job = make_job(member, device, state="done")
    page = member_client.get(f"/jobs/{job.pk}/again/").content.decode()
    assert "Run again with changes" in page and "a red fox in the snow" in page
    response = member_client.post(
        f"/jobs/{job.pk}/again/",
        {
            "model": job.model_id,
            "prompt": "a red fox in the rain",
            "size": "832x480",
            "seconds": "3",
            "steps": "4",
            "when": "asap",
            "polite": "on",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    new = Job.objects.exclude(pk=job.pk).get()
    assert new.params["seconds"] == 3 and new.prompt == "a red fox in the rain"


def test_it_keeps_viewers_from_running_again(viewer_client, member, device):
    job = make_job(member, device, shared=True)
    assert viewer_client.get(f"/jobs/{job.pk}/again/").status_code == 403


def test_anonymous_people_are_sent_to_sign_in_everywhere(member, device, media):
    job = make_job(member, device, state="done")
    art = add_artifact(job, media)
    anon = Client()
    gets = [
        "/jobs/",
        "/jobs/new/",
        "/jobs/queue/",
        f"/jobs/{job.pk}/",
        f"/jobs/{job.pk}/npu/",
        f"/jobs/{job.pk}/again/",
        f"/jobs/{job.pk}/files/{art.pk}/",
        f"/jobs/devices/{device.pk}/sparkline/",
        "/accounts/people/",
    ]
    posts = [
        "/jobs/new/admission/",
        f"/jobs/{job.pk}/cancel/",
        f"/jobs/{job.pk}/retry/",
        f"/jobs/{job.pk}/share/",
        f"/jobs/{job.pk}/share-link/",
        f"/jobs/{job.pk}/bookmark/",
        f"/jobs/{job.pk}/move/",
        f"/jobs/{job.pk}/run-next/",
        f"/jobs/queue/{device.pk}/pause/",
        f"/jobs/queue/{device.pk}/resume/",
    ]
    for url in gets:
        response = anon.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), url
    for url in posts:
        assert anon.post(url).status_code == 302, url
    job.refresh_from_db()
    assert job.state == "done" and not job.shared and not job.share_token
    assert anon.get("/jobs/shared/not-a-token/").status_code == 404  # the public view: the token is the key
