"""The Trash page, the delete page's warning, ``DELETE /api/jobs/{id}`` (409 unless ``force``),
``POST /api/jobs/{id}/restore`` and ``/v1``'s delete going to the trash; a stranger gets 404 everywhere."""

from __future__ import annotations

import hashlib

import pytest
from django.test import Client

from hub.accounts.tokens import token_create
from jobs.models import Artifact, Job, JobLink, JobState
from jobs.queue import trash
from jobs.tests.ui_fixtures import PNG, add_artifact, make_job

pytestmark = pytest.mark.django_db

DATA = bytes(i * 13 % 251 for i in range(20_000))


@pytest.fixture(autouse=True)
def _no_rate_limit(settings):
    settings.HUB_API_SUBMIT_RATE = "0"


def token_client(user, scopes=("read", "submit")) -> Client:
    _, raw = token_create(user=user, name="script", scopes=list(scopes))
    return Client(headers={"Authorization": f"Bearer {raw}"})


def done_job(owner, device, media, prompt="a heron at dawn"):
    job = make_job(owner, device, state="done", prompt=prompt)
    add_artifact(job, media, data=DATA)
    add_artifact(job, media, kind="thumb", name="thumb.png", mime="image/png", data=PNG)
    return job


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_the_trash_page_lists_thumbnails_and_days_left_and_restores(member_client, member, device, media):
    empty = member_client.get("/jobs/trash/").content.decode()
    assert 'id="trash-empty"' in empty and "30 days" in empty
    job = done_job(member, device, media)
    video = job.artifacts.get(kind="video")
    before = hashlib.sha256(body(member_client.get(f"/jobs/{job.pk}/files/{video.pk}/"))).hexdigest()
    member_client.post(f"/usage/results/{job.pk}/delete/")
    # hidden everywhere: the job page, its files, the gallery, a search
    assert member_client.get(f"/jobs/{job.pk}/").status_code == 404
    assert member_client.get(f"/jobs/{job.pk}/files/{video.pk}/").status_code == 404
    assert "a heron at dawn" not in member_client.get("/jobs/").content.decode()
    assert "a heron at dawn" not in member_client.get("/jobs/?q=heron").content.decode()
    page = member_client.get("/jobs/trash/").content.decode()
    assert f'id="trash-{job.pk}"' in page and "30 days left" in page and "a heron at dawn" in page
    thumb = job.artifacts.get(kind="thumb")
    assert f"/jobs/trash/{job.pk}/thumb/{thumb.pk}/" in page
    assert body(member_client.get(f"/jobs/trash/{job.pk}/thumb/{thumb.pk}/")) == PNG
    restored = member_client.post(f"/jobs/trash/{job.pk}/restore/")
    assert restored.status_code == 302 and restored["Location"] == "/jobs/trash/"
    after = hashlib.sha256(body(member_client.get(f"/jobs/{job.pk}/files/{video.pk}/"))).hexdigest()
    assert after == before == hashlib.sha256(DATA).hexdigest()
    assert "a heron at dawn" in member_client.get("/jobs/").content.decode()


def test_a_stranger_can_neither_see_nor_restore_nor_delete_anothers_trash(
    member_client, other_client, member, other_member, device, media
):
    job = done_job(member, device, media, prompt="mia-private-heron")
    member_client.post(f"/usage/results/{job.pk}/delete/")
    thumb = job.artifacts.get(kind="thumb")
    assert "mia-private-heron" not in other_client.get("/jobs/trash/").content.decode()
    assert other_client.post(f"/jobs/trash/{job.pk}/restore/").status_code == 404
    assert other_client.get(f"/jobs/trash/{job.pk}/delete/").status_code == 404
    assert other_client.post(f"/jobs/trash/{job.pk}/delete/").status_code == 404
    assert other_client.get(f"/jobs/trash/{job.pk}/thumb/{thumb.pk}/").status_code == 404
    other_client.post("/jobs/trash/empty/")
    job.refresh_from_db()
    assert job.trashed_at is not None and Artifact.objects.filter(job=job).count() == 2
    other_api = token_client(other_member)
    assert other_api.post(f"/api/jobs/{job.pk}/restore").status_code == 404
    assert other_api.delete(f"/api/jobs/{job.pk}").status_code == 404


def test_delete_for_good_and_empty_ask_first(
    member_client, member, device, media, django_capture_on_commit_callbacks
):
    one, two = done_job(member, device, media), done_job(member, device, media)
    for job in (one, two):
        member_client.post(f"/usage/results/{job.pk}/delete/")
    confirm = member_client.get(f"/jobs/trash/{one.pk}/delete/").content.decode()
    assert 'id="trash-purge-confirm"' in confirm and Artifact.objects.filter(job=one).count() == 2
    with django_capture_on_commit_callbacks(execute=True):
        member_client.post(f"/jobs/trash/{one.pk}/delete/")
    assert not Artifact.objects.filter(job=one).exists()
    assert 'id="trash-empty-confirm"' in member_client.get("/jobs/trash/empty/").content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        member_client.post("/jobs/trash/empty/")
    assert not Artifact.objects.filter(job=two).exists()
    assert 'id="trash-empty"' in member_client.get("/jobs/trash/").content.decode()


def test_the_trash_page_is_paginated(member_client, member, device, media):
    jobs = [make_job(member, device, state="done", prompt=f"p{i}") for i in range(trash_views_per_page() + 2)]
    for job in jobs:
        trash.trash_move(job=job, by=member)
    first = member_client.get("/jobs/trash/").content.decode()
    assert 'id="trash-pages"' in first and "Page 1 of 2" in first
    second = member_client.get("/jobs/trash/?page=2").content.decode()
    assert second.count('class="job-card card"') == 2
    assert member_client.get("/jobs/trash/?page=nonsense").status_code == 200


def trash_views_per_page() -> int:
    from jobs.doors.trash_views import PER_PAGE

    return PER_PAGE


def test_the_delete_page_warns_of_waiting_jobs(member_client, member, device, media):
    parent = make_job(member, device, state="failed")
    child = make_job(member, device, state="held", kind="image")
    JobLink.objects.create(child=child, parent=parent, parent_number=parent.pk, field="image")
    page = member_client.get(f"/usage/results/{parent.pk}/delete/").content.decode()
    assert 'id="children-warning"' in page and f"#{child.pk}" in page
    member_client.post(f"/usage/results/{parent.pk}/delete/")
    child.refresh_from_db()
    assert child.state == JobState.CANCELLED


def test_the_api_deletes_to_the_trash_refuses_waiting_children_unless_forced_and_restores(
    member, device, media
):
    me = token_client(member)
    job = done_job(member, device, media)
    child = make_job(member, device, state="held", kind="image")
    JobLink.objects.create(child=child, parent=job, parent_number=job.pk, field="image")
    refused = me.delete(f"/api/jobs/{job.pk}")
    assert refused.status_code == 409 and f"#{child.pk}" in refused.json()["detail"]
    assert "force" in refused.json()["errors"]
    job.refresh_from_db()
    assert job.trashed_at is None
    done = me.delete(f"/api/jobs/{job.pk}?force=true")
    assert done.status_code == 200
    out = done.json()
    assert out["trashed"] is True and out["cancelled"] == [child.pk] and out["purge_at"]
    assert me.get(f"/api/jobs/{job.pk}").status_code == 404
    assert job.pk not in [j["id"] for j in me.get("/api/jobs").json()["items"]]
    assert me.delete(f"/api/jobs/{job.pk}").status_code == 200  # again: the same answer
    restored = me.post(f"/api/jobs/{job.pk}/restore")
    assert restored.status_code == 200 and restored.json()["id"] == job.pk
    assert me.post(f"/api/jobs/{job.pk}/restore").status_code == 404  # not in the trash any more
    assert me.get(f"/api/jobs/{job.pk}").status_code == 200


def test_the_api_refuses_a_running_job_and_a_read_token(member, viewer, device):
    running = make_job(member, device, state="running")
    assert token_client(member).delete(f"/api/jobs/{running.pk}").status_code == 422
    queued = make_job(member, device, state="queued")
    refused = token_client(member).delete(f"/api/jobs/{queued.pk}")
    assert refused.status_code == 422 and "cancel it first" in refused.json()["detail"]
    assert token_client(member, scopes=("read",)).delete(f"/api/jobs/{running.pk}").status_code == 403
    assert token_client(member).delete("/api/jobs/99999999").status_code == 404


def test_v1_delete_moves_a_finished_video_to_the_trash_in_openais_shape(member, device, media):
    job = done_job(member, device, media)
    me = token_client(member)
    answer = me.delete(f"/v1/videos/video_{job.pk}")
    assert answer.json() == {"id": f"video_{job.pk}", "object": "video.deleted", "deleted": True}
    job.refresh_from_db()
    assert job.trashed_at is not None and Artifact.objects.filter(job=job).count() == 2
    assert f"video_{job.pk}" not in [v["id"] for v in me.get("/v1/videos").json()["data"]]
    trash.trash_restore(job=job, by=member)
    assert me.get(f"/v1/videos/video_{job.pk}").status_code == 200


def test_a_share_link_opens_nothing_while_its_job_is_in_the_trash(client, member, device, media):
    from jobs.queue.services import job_share_link

    job = done_job(member, device, media)
    job = job_share_link(job=job, by=member, enable=True)
    assert client.get(f"/jobs/shared/{job.share_token}/").status_code == 200
    trash.trash_move(job=job, by=member)
    video = job.artifacts.get(kind="video")
    assert client.get(f"/jobs/shared/{job.share_token}/").status_code == 404
    assert client.get(f"/jobs/shared/{job.share_token}/files/{video.pk}/").status_code == 404
    trash.trash_restore(job=job, by=member)
    assert client.get(f"/jobs/shared/{job.share_token}/").status_code == 200


def test_the_usage_api_and_page_show_the_trash(member_client, member, device, media):
    job = done_job(member, device, media)
    trash.trash_move(job=job, by=member)
    size_mb = round((len(DATA) + len(PNG)) / (1024 * 1024), 1)
    assert token_client(member).get("/api/usage").json()["trash_mb"] == size_mb
    assert 'id="my-trash"' in member_client.get("/usage/").content.decode()
    assert Job.objects.get(pk=job.pk).trashed_at is not None


def test_the_job_page_offers_the_delete_to_its_owner_only(member_client, other_client, member, device, media):
    job = done_job(member, device, media)
    job.shared = True
    job.save(update_fields=["shared"])
    assert 'id="job-delete"' in member_client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="job-delete"' not in other_client.get(f"/jobs/{job.pk}/").content.decode()
    done = member_client.post(f"/usage/results/{job.pk}/delete/", {"next": "/jobs/"})
    assert done["Location"] == "/jobs/"
