"""A date at the edge of ``datetime`` stored behind the hub's back (raw SQL, an old backup) breaks no page.

Admission and the model refuse a "not before" past ``MAX_NOT_BEFORE``, but a row may hold anything. Shown in a
zone east of UTC, 9999-12-31 23:59 UTC is past ``datetime.max`` (and 0001-01-01 00:00 UTC before
``datetime.min`` west of it): every page, fragment and push that printed it raised OverflowError. Job rows
are clamped when read (``jobs.models.clamp_datetime``), so every display and plan path gets a real date.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from jobs.models import Job, clamp_datetime
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db

MAX = dt.datetime.max.replace(tzinfo=dt.UTC)
MIN = dt.datetime.min.replace(tzinfo=dt.UTC)
FIELDS = ["not_before", "retry_after", "predicted_start", "predicted_finish", "next_poll_at"]


def _write_raw(job_id: int, value: dt.datetime, fields: list[str]) -> None:
    """Straight into the table, the way a hand-made UPDATE would (no model, no clean())."""
    stored = value.replace(tzinfo=None).isoformat(sep=" ")
    sets = ", ".join(f"{f} = %s" for f in fields)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE jobs_job SET {sets}, \"when\" = 'not_before' WHERE id = %s",
            [stored] * len(fields) + [job_id],
        )


@pytest.fixture
def far_jobs(member, other_member, device):
    """A member's own waiting job and another's, both at the very end of time; a running one started at its
    beginning."""
    mine = make_job(member, device, state="scheduled", prompt="my job at the end of time")
    theirs = make_job(other_member, device, state="queued", prompt="their job at the end of time")
    running = make_job(other_member, device, state="running", prompt="an old render")
    _write_raw(mine.pk, MAX, FIELDS)
    _write_raw(theirs.pk, MAX, FIELDS)
    _write_raw(running.pk, MIN, ["started_at", "predicted_start"])
    return mine, theirs, running


def test_clamp_keeps_every_date_inside_any_zone():
    for zone in ("Asia/Tokyo", "Pacific/Kiritimati", "America/New_York", "Etc/GMT+12"):
        with timezone.override(zone):
            for value in (MAX, MIN, MAX - dt.timedelta(hours=3), MIN + dt.timedelta(hours=3)):
                clamped = clamp_datetime(value)
                assert timezone.localtime(clamped)  # converts without OverflowError
                assert clamped + dt.timedelta(days=1) and clamped - dt.timedelta(days=1)
    ordinary = timezone.now()
    assert clamp_datetime(ordinary) == ordinary and clamp_datetime(None) is None


def test_a_row_read_from_the_database_is_clamped(far_jobs):
    mine, _, running = far_jobs
    job = Job.objects.get(pk=mine.pk)
    assert job.not_before == clamp_datetime(MAX) and job.not_before.tzinfo is not None
    assert Job.objects.select_related("owner").get(pk=running.pk).started_at == clamp_datetime(MIN)


@pytest.mark.parametrize("zone", ["Asia/Tokyo", "America/New_York"])
def test_every_page_shows_a_job_at_the_end_of_time(zone, far_jobs, member_client, admin_client, device):
    mine, theirs, running = far_jobs
    with override_settings(TIME_ZONE=zone):
        pages = {
            member_client: [
                "/",
                "/jobs/queue/",
                f"/jobs/new/?device={device.pk}",
                "/jobs/",
                f"/jobs/{mine.pk}/",
            ],
            admin_client: ["/", "/jobs/queue/", f"/jobs/{theirs.pk}/", f"/jobs/{running.pk}/", "/jobs/"],
        }
        for client, urls in pages.items():
            for url in urls:
                response = client.get(url)
                assert response.status_code == 200, (zone, url, response.status_code)
        for url in (f"/api/jobs/{mine.pk}", "/api/jobs"):
            assert member_client.get(url).status_code == 200, url
        html = member_client.get("/").content.decode()
        entry = html[html.index(f'id="plan-{mine.pk}"') :]
        assert (
            "my job at the end of time" in entry[: entry.index("</li>")]
        )  # the plan lists it, by its prompt


@override_settings(TIME_ZONE="Asia/Tokyo")
def test_the_plan_and_the_live_fragments_take_a_job_at_the_end_of_time(far_jobs, device, member):
    from jobs.live import fragments
    from jobs.queue.eta import plan_device

    plan_device(device.pk)  # the planner reads the clamped rows and stores its horizon, not an overflow
    mine, theirs, running = far_jobs
    for job in (mine, theirs, running):
        full = fragments.job_with_related(job.pk)
        assert fragments.job_page_fragments(full, viewer=member, with_player=True)
    assert all(fragments.queue_fragments(device))
    assert fragments.queue_admin_fragments(device)
    assert fragments.running_fragment(device)
