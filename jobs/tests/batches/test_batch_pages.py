"""The page's batch mode, and a batch shown and cancelled as one group on the queue page and in the gallery."""

from __future__ import annotations

import html

import pytest

from jobs.models import Job
from jobs.queue import enqueue
from jobs.tests.ui_fixtures import VIDEO

pytestmark = pytest.mark.django_db

FIELDS = {"model": VIDEO, "size": "832x480", "seconds": "2", "steps": "4", "when": "asap", "polite": "on"}


@pytest.fixture(autouse=True)
def _quiet(settings, monkeypatch):
    settings.HUB_PAGE_CACHE_S = 0
    monkeypatch.setattr(enqueue, "send", lambda *a, **kw: None)


def form(device, prompt, mode="lines", **over):
    return {"device": device.pk, "kind": "video", "prompt": prompt, "batch_mode": mode, **FIELDS, **over}


def text(response) -> str:
    return html.unescape(response.content.decode())


def test_a_prompt_per_line_queues_a_batch_and_shows_the_group(member_client, device):
    response = member_client.post(
        "/jobs/new/", form(device, "a red car\na blue car\na green car"), follow=True
    )
    assert response.status_code == 200
    jobs = list(Job.objects.order_by("pk"))
    assert [j.prompt for j in jobs] == ["a red car", "a blue car", "a green car"]
    assert len({j.batch for j in jobs}) == 1 and jobs[0].batch
    page = text(response)
    assert "Queued a batch of 3 jobs" in page
    assert "Batch of 3: 3 queued" in page
    assert "Cancel the batch" in page
    assert page.count('class="tag batch-tag"') == 3


def test_seeds_and_matrix_from_the_form(member_client, device):
    member_client.post("/jobs/new/", form(device, "fox", mode="seeds", seed="40", batch_count="3"))
    assert sorted(j.params["seed"] for j in Job.objects.all()) == [40, 41, 42]
    member_client.post("/jobs/new/", form(device, "a {red|blue} car at {dawn|night}", mode="matrix"))
    assert Job.objects.filter(prompt__startswith="a ").count() == 4


def test_a_refused_member_is_named_and_nothing_is_queued(member_client, device):
    long_line = "x" * 5000
    response = member_client.post("/jobs/new/", form(device, f"fine\n{long_line}"))
    assert response.status_code == 400
    assert "Job 2 (" in text(response)
    assert not Job.objects.exists()


def test_too_big_a_batch_is_refused_with_the_cap(member_client, device):
    response = member_client.post("/jobs/new/", form(device, "fox", mode="seeds", batch_count="51"))
    assert response.status_code == 400
    assert "at most 50 jobs" in text(response)
    assert not Job.objects.exists()


def test_a_double_click_queues_one_batch(member_client, device):
    data = form(device, "one\ntwo", submit_token="Tq3xN5ZpLr8Vw2Yc4Hj6Kf9Bm1Ds7Ge0")
    member_client.post("/jobs/new/", data)
    again = member_client.post("/jobs/new/", data, follow=True)
    assert Job.objects.count() == 2
    assert "already sent" in text(again)


def test_the_summary_counts_the_batch(member_client, device):
    response = member_client.post("/jobs/new/admission/", form(device, "a\nb\nc\nd"), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    page = text(response)
    assert "4 jobs" in page and "the last ready" in page
    assert not Job.objects.exists()


def test_the_queue_page_groups_the_batch_and_only_the_owner_may_cancel(
    member_client, other_client, viewer_client, admin_client, device
):
    member_client.post("/jobs/new/", form(device, "a\nb", shared="on"))
    batch = Job.objects.first().batch
    mine = text(member_client.get("/jobs/queue/"))
    assert "Batch of 2: 2 queued" in mine and f"batch-cancel-{batch}" in mine
    theirs = text(other_client.get("/jobs/queue/"))
    assert "Batch of 2: 2 queued" in theirs and f"batch-cancel-{batch}" not in theirs
    url = f"/jobs/batches/{batch}/cancel/"
    assert other_client.post(url).status_code == 403
    assert viewer_client.post(url).status_code == 403
    assert not Job.objects.filter(state="cancelled").exists()
    response = member_client.post(url, {"reason": "enough"}, follow=True)
    assert "Cancelled the batch (batch of 2: 2 cancelled)" in text(response)
    assert set(Job.objects.values_list("state", flat=True)) == {"cancelled"}
    assert (
        "Batches"
        not in text(member_client.get("/jobs/queue/")).split("<h1>Queue</h1>")[1].split("queue-device")[0]
    )


def test_a_private_batch_is_404_to_another_member(member_client, other_client, device):
    member_client.post("/jobs/new/", form(device, "a\nb"))
    batch = Job.objects.first().batch
    assert other_client.post(f"/jobs/batches/{batch}/cancel/").status_code == 404
    assert "Batch of 2" not in text(other_client.get(f"/jobs/?batch={batch}"))


def test_the_job_page_links_its_batch(member_client, device):
    member_client.post("/jobs/new/", form(device, "a\nb"))
    job = Job.objects.first()
    page = text(member_client.get(f"/jobs/{job.pk}/"))
    assert f'href="/jobs/?batch={job.batch}"' in page and "part of a batch" in page


def test_a_long_batch_of_lines_is_judged_line_by_line(member_client, device):
    """50 lines of 100 characters: more than one prompt may hold (4000), each line fine."""
    lines = "\n".join(f"{i:03d} " + "a quiet harbour at dawn " * 4 for i in range(50))
    assert len(lines) > 4000
    summary = text(member_client.post("/jobs/new/admission/", form(device, lines), HTTP_HX_REQUEST="true"))
    assert "50 jobs" in summary and "Can't queue yet" not in summary
    response = member_client.post("/jobs/new/", form(device, lines))
    assert response.status_code == 302
    assert Job.objects.count() == 50


def test_an_unticked_polite_stays_off_in_a_batch(member_client, device):
    data = form(device, "a\nb")
    data.pop("polite")
    member_client.post("/jobs/new/", data)
    assert set(Job.objects.values_list("polite", flat=True)) == {False}


def _mesh(device, **over):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from jobs.tests.ui_fixtures import MESH, PNG

    return {
        "device": device.pk,
        "kind": "mesh",
        "model": MESH,
        "when": "asap",
        "batch_mode": "seeds",
        "seed": "3",
        "batch_count": "3",
        "image": SimpleUploadedFile("obj.png", PNG, "image/png"),
        **over,
    }


def _stored(media) -> list:
    return sorted(p for p in media.rglob("*") if p.is_file()) if media.exists() else []


def test_a_batch_with_a_picture_saves_it_for_each_job(member_client, device, media):
    response = member_client.post("/jobs/new/", _mesh(device))
    assert response.status_code == 302, text(response)[:2000]
    jobs = list(Job.objects.order_by("pk"))
    assert [j.params["seed"] for j in jobs] == [3, 4, 5]
    assert all(j.params["files"]["image"] for j in jobs)
    assert len({j.params["files"]["image"] for j in jobs}) == 3
    assert len(_stored(media)) == 3


def test_a_refused_batch_with_a_picture_leaves_no_file(admin_user, member, member_client, device, media):
    from jobs.quotas import services as quotas

    quotas.quota_set(by=admin_user, user=member, max_queued=2)
    response = member_client.post("/jobs/new/", _mesh(device))
    assert response.status_code == 400
    assert "Job 3" in text(response) and "Jobs in the queue" in text(response)
    assert not Job.objects.exists()
    assert [p for p in _stored(media) if "inputs" in p.parts] == []


def test_the_summary_says_why_a_batch_is_too_big_without_a_field_name(member_client, device):
    prompt = "{a|b|c|d|e|f|g|h} x {1|2|3|4|5|6|7|8}"
    response = member_client.post("/jobs/new/admission/", form(device, prompt, mode="matrix"))
    words = text(response)
    assert "Can't queue yet: A batch holds at most 50 jobs" in words, (
        words
    )  # not "Can't queue yet: prompt: A …"
