"""The Usage page (mine; admins: everyone's with the top users), deleting results to free storage, and
``manage.py quota``."""

from __future__ import annotations

import datetime as dt
import html
import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from jobs.models import Artifact, DeviceUse, PersonQuota
from jobs.quotas import services as quotas
from jobs.tests.ui_fixtures import add_artifact, make_job

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("midday")]  # minutes "today", at any hour


def spend(user, device, minutes: float, *, job=None, ago: float = 0.0) -> DeviceUse:
    """A span the device was held, ending ``ago`` minutes ago (from noon: the day is never split)."""
    end = timezone.now() - dt.timedelta(minutes=ago)
    start = end - dt.timedelta(minutes=minutes)
    return DeviceUse.objects.create(
        owner=user, job=job, device=device, started=start, ended=end, seconds=(end - start).total_seconds()
    )


def minutes_today(user) -> int:
    return round(quotas.usage_for(user).day_s / 60)


# -- the page ---------------------------------------------------------------------------------------------------
def test_a_member_sees_their_own_usage_and_nobody_elses(member_client, member, other_member, device, media):
    mine = make_job(member, device, state="done", prompt="my fox")
    theirs = make_job(other_member, device, state="done", prompt="otto-secret-prompt")
    add_artifact(mine, media, data=b"m" * 3000)
    add_artifact(theirs, media, data=b"o" * 5000)
    spend(member, device, 12, job=mine)
    spend(other_member, device, 30, job=theirs)
    page = member_client.get("/usage/")
    assert page.status_code == 200
    text = html.unescape(page.content.decode())
    # My chart: today's bar carries my minutes; the numbers table says the same in words.
    today = timezone.localdate().strftime("%a %d %b")
    assert re.search(rf"<td>{today}</td><td>{minutes_today(member)} min</td>", text), text
    assert f'id="result-{mine.pk}"' in text and f"/usage/results/{mine.pk}/delete/" in text
    for leak in ("otto", "otto-secret-prompt", f"result-{theirs.pk}", 'id="everyone"'):
        assert leak not in text


def test_an_admin_sees_everyone_with_the_top_users(
    admin_client, admin_user, member, other_member, device, media
):
    spend(member, device, 12)
    spend(other_member, device, 30)
    big = make_job(other_member, device, state="done")
    add_artifact(big, media, data=b"o" * 5000)
    text = html.unescape(admin_client.get("/usage/").content.decode())
    assert 'id="everyone"' in text and 'id="top-users"' in text
    rows = re.findall(r'id="usage-person-(\d+)"', text)
    assert rows[:2] == [str(other_member.pk), str(member.pk)]  # most device time first
    assert f'id="all-result-{big.pk}"' in text


def test_an_empty_usage_page_says_so(viewer_client):
    text = viewer_client.get("/usage/").content.decode()
    assert 'id="my-minutes-empty"' in text and 'id="results-empty"' in text and 'id="no-limits"' in text


def test_the_usage_page_shows_my_limits(admin_user, member_client, member, device):
    quotas.quota_set(by=admin_user, device_minutes_per_day=60)
    quotas.quota_set(by=admin_user, user=member, storage_mb=100)
    spend(member, device, 6)
    text = html.unescape(member_client.get("/usage/").content.decode())
    row = re.search(r'id="limit-device_minutes_per_day">(.*?)</tr>', text, re.S).group(1)
    assert f"{minutes_today(member)} minutes" in row and "60 minutes" in row
    storage = re.search(r'id="limit-storage_mb">(.*?)</tr>', text, re.S).group(1)
    assert "100 MB" in storage and "yours" in storage


def test_results_are_listed_largest_first_with_their_files_and_only_the_persons_own(
    member, other_member, device, media
):
    small = make_job(member, device, state="done", prompt="small")
    big = make_job(member, device, state="failed", prompt="big")  # a failed job may keep files too
    add_artifact(small, media, data=b"s" * 100)
    add_artifact(big, media, data=b"b" * 900)
    add_artifact(big, media, kind="image", name="preview.png", mime="image/png", data=b"p" * 50)
    make_job(member, device, state="done", prompt="no files")
    running = make_job(member, device, state="running", prompt="still running")
    add_artifact(running, media, data=b"r" * 5000)  # a preview while it runs: not a result yet
    add_artifact(make_job(other_member, device, state="done", prompt="theirs"), media, data=b"o" * 9000)
    mine = quotas.results_of(user=member)
    assert [(j.prompt, j.result_bytes, j.result_files) for j in mine] == [("big", 950, 2), ("small", 100, 1)]
    assert [j.prompt for j in quotas.results_of(user=None)] == ["theirs", "big", "small"]
    assert [j.prompt for j in quotas.results_of(user=None, limit=1)] == ["theirs"]
    assert mine[0].owner == member  # read with the job


# -- deleting results -------------------------------------------------------------------------------------------
def test_deleting_results_asks_first_moves_them_to_the_trash_and_emptying_it_frees_storage(
    member_client, member, device, media, django_capture_on_commit_callbacks
):
    job = make_job(member, device, state="done")
    video = add_artifact(job, media, data=b"v" * 4000)
    thumb = add_artifact(job, media, kind="thumb", name="thumb.webp", mime="image/webp", data=b"t" * 100)
    paths = [Path(media) / a.file.name for a in (video, thumb)]
    assert quotas.storage_bytes(member) == 4100
    confirm = member_client.get(f"/usage/results/{job.pk}/delete/")
    assert confirm.status_code == 200
    assert 'id="results-delete-confirm"' in confirm.content.decode()
    assert Artifact.objects.filter(job=job).count() == 2 and all(
        p.exists() for p in paths
    )  # a GET deletes nothing
    with django_capture_on_commit_callbacks(execute=True):
        done = member_client.post(f"/usage/results/{job.pk}/delete/")
    assert done.status_code == 302 and done["Location"] == "/usage/"
    # In the trash: the files are kept and still count against storage (the Usage page says how much)
    assert quotas.storage_bytes(member) == 4100 and all(p.exists() for p in paths)
    assert job.events.filter(message__startswith="Moved to the trash by its owner").exists()
    text = member_client.get("/usage/").content.decode()
    assert f'id="result-{job.pk}"' not in text and 'id="my-trash"' in text
    with django_capture_on_commit_callbacks(execute=True):
        member_client.post(f"/jobs/trash/{job.pk}/delete/")
    assert quotas.storage_bytes(member) == 0
    assert not any(p.exists() for p in paths)
    assert job.events.filter(message__startswith="Results deleted by its owner: 2 file(s)").exists()


def test_a_deleted_result_lets_a_refused_job_in(
    admin_user, member, device, media, django_capture_on_commit_callbacks
):
    quotas.quota_set(by=admin_user, storage_mb=1)
    job = make_job(member, device, state="done")
    add_artifact(job, media, data=b"v" * (quotas.MB + 1))
    assert quotas.quota_check(owner=member, estimate_s=60).refused.startswith(
        "Storage for results: 1 of 1 MB"
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert quotas.results_delete(job=job, by=member) == quotas.MB + 1
    assert quotas.quota_check(owner=member, estimate_s=60).refused is None


def test_others_may_not_delete_my_results_but_an_admin_may(
    other_client, admin_client, member, device, media, django_capture_on_commit_callbacks
):
    private = make_job(member, device, state="done")
    shared = make_job(member, device, state="done", shared=True)
    for job in (private, shared):
        add_artifact(job, media)
    assert other_client.get(f"/usage/results/{private.pk}/delete/").status_code == 404
    assert other_client.post(f"/usage/results/{private.pk}/delete/").status_code == 404
    assert other_client.post(f"/usage/results/{shared.pk}/delete/").status_code == 403
    assert Artifact.objects.count() == 2
    with django_capture_on_commit_callbacks(execute=True):
        assert admin_client.post(f"/usage/results/{private.pk}/delete/").status_code == 302
    assert private.events.filter(message__startswith="Moved to the trash by an admin (ada)").exists()
    private.refresh_from_db()
    assert private.trashed_at is not None and Artifact.objects.count() == 2


def test_a_running_jobs_results_are_not_deleted(member_client, member, device, media):
    job = make_job(member, device, state="collecting")
    add_artifact(job, media)
    page = member_client.get(f"/usage/results/{job.pk}/delete/").content.decode()
    assert "still running" in page and 'id="results-delete-confirm"' not in page
    member_client.post(f"/usage/results/{job.pk}/delete/")
    assert Artifact.objects.filter(job=job).count() == 1


# -- manage.py quota -------------------------------------------------------------------------------------------
def run(*args: str) -> str:
    out = StringIO()
    call_command("quota", *args, stdout=out)
    return out.getvalue()


def test_the_command_sets_what_is_given_and_prints_limits_and_usage(member, device):
    spend(member, device, 9)
    make_job(member, device, state="queued", estimate_s=600)
    out = run("mia", "--device-minutes-per-day", "60", "--max-queued", "4")
    assert "Limits of mia:" in out
    assert re.search(
        r"Daily device time:\s+60 minutes \(own\)\s+used today: [\d.]+ minutes \(\+10 booked", out
    ), out
    assert re.search(r"Jobs in the queue:\s+4 jobs \(own\)\s+in the queue now: 1", out), out
    assert re.search(r"Storage for results:\s+no limit \(default\)", out), out
    assert quotas.limits_for(member).device_minutes_per_week is None
    out = run("mia", "--storage-mb", "none", "--max-queued", "default")
    assert re.search(r"Jobs in the queue:\s+no limit \(default\)", out), out
    assert re.search(r"Storage for results:\s+no limit \(own: none\)", out), out
    assert quotas.overrides_of(member)["device_minutes_per_day"] == 60  # untouched: not given
    run("mia", "--clear")
    assert not PersonQuota.objects.filter(user=member).exists()


def test_the_command_sets_household_defaults_and_refuses_nonsense(member):
    out = run("--household", "--device-minutes-per-week", "300")
    assert re.search(r"Weekly device time:\s+300 minutes", out), out
    assert quotas.limits_for(member).device_minutes_per_week == 300
    with pytest.raises(CommandError, match="No one is called 'nobody'"):
        run("nobody", "--max-queued", "1")
    with pytest.raises(CommandError, match="--max-queued: Give a whole number"):
        run("mia", "--max-queued", "-3")
    with pytest.raises(CommandError, match="Name one person"):
        run("--max-queued", "1")
