"""Device time per device and in total: the Usage page (mine; admins: the household's too) and ``GET /api/usage``.

Two devices; jobs for any device are placed by the pool planner (``jobs.queue.pool.rebalance``), and each one's
device time is recorded on the device it ran on, as the engine does when it gives the device back."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.utils import timezone

from jobs.models import Job
from jobs.queue.pool import rebalance
from jobs.quotas import services as quotas
from jobs.quotas.per_device import device_times
from jobs.tests.ui_fixtures import make_job

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("midday")]  # minutes "today", at any hour


def ran(job, minutes: float) -> None:
    """``job`` held its device for ``minutes``, ending now (at noon: no day is split)."""
    now = timezone.now()
    start = now - dt.timedelta(minutes=minutes)
    Job.objects.filter(pk=job.pk).update(state="done", started_at=start, finished_at=now)
    quotas.device_use_record(
        job_id=job.pk, owner_id=job.owner_id, device_id=job.device_id, started=start, ended=now
    )


@pytest.fixture
def spent(member, other_member, device, kitchen):
    """Two jobs of mia's for any device, spread by the pool over both devices, then run: 12 and 20 minutes;
    otto's 30 minutes on the kitchen one, pinned there."""
    pool = [device.pk, kitchen.pk]
    mine = [make_job(member, device, pinned=False, pool=pool, prompt=f"mia {i}") for i in range(2)]
    rebalance()
    for job in mine:
        job.refresh_from_db()
    assert {job.device_id for job in mine} == {device.pk, kitchen.pk}  # one on each
    on = {job.device_id: job for job in mine}
    ran(on[device.pk], 12)
    ran(on[kitchen.pk], 20)
    ran(make_job(other_member, kitchen, prompt="otto's"), 30)
    return on


def minutes(seconds: float) -> int:
    return round(seconds / 60)


def test_device_time_is_counted_on_the_device_each_job_ran_on(member, device, kitchen, spent):
    mine = device_times(user=member)
    by = {row.device_id: row for row in mine.rows}
    assert [row.name for row in mine.rows] == ["Kitchen Tiiny", "Pocket"]  # every device, by name
    assert (minutes(by[device.pk].today_s), minutes(by[kitchen.pk].today_s)) == (12, 20)
    assert (
        minutes(mine.total.today_s) == 32 == round(quotas.usage_for(member).day_s / 60)
    )  # the limits' total
    for row in (*mine.rows, mine.total):
        assert row.recent_s >= row.week_s >= row.today_s

    everyone = device_times(user=None)
    by = {row.device_id: row for row in everyone.rows}
    assert (minutes(by[device.pk].today_s), minutes(by[kitchen.pk].today_s)) == (12, 50)
    assert minutes(everyone.total.today_s) == 62


def test_a_running_job_counts_on_its_device_so_far(member, device, kitchen, spent):
    make_job(member, kitchen, state="running")  # (started two minutes ago)
    by = {row.device_id: row for row in device_times(user=member).rows}
    assert minutes(by[kitchen.pk].today_s) == 22 and minutes(by[device.pk].today_s) == 12


def test_the_usage_page_shows_mine_per_device_and_admins_the_households(
    member_client, admin_client, member, device, kitchen, spent
):
    page = member_client.get("/usage/").content.decode()
    table = re.search(
        r'<table class="health-table device-times" id="my-device-times">.*?</table>', page, re.S
    )
    assert table, page
    rows = table.group(0)
    assert re.search(rf'id="my-device-times-{device.pk}">\s*<th scope="row">Pocket</th><td>12 min</td>', rows)
    assert re.search(
        rf'id="my-device-times-{kitchen.pk}">\s*<th scope="row">Kitchen Tiiny</th><td>20 min</td>', rows
    )
    assert re.search(r'id="my-device-times-total"><th scope="row">All devices</th><td>32 min</td>', rows)
    assert "all-device-times" not in page and "otto" not in page  # the household's is for admins

    admin = admin_client.get("/usage/").content.decode()
    everyone = re.search(r'id="all-device-times">.*?</table>', admin, re.S).group(0)
    assert re.search(
        rf'id="all-device-times-{kitchen.pk}">\s*<th scope="row">Kitchen Tiiny</th><td>50 min</td>', everyone
    )
    assert re.search(
        r'id="all-device-times-total"><th scope="row">All devices</th><td>1 h 2 min</td>', everyone
    )


def test_the_api_gives_device_minutes_per_device(member, admin_user, device, kitchen, spent):
    from jobs.tests.doors.test_api_queue import token_client

    usage = token_client(member, scopes=("read",)).get("/api/usage").json()
    by = {row["device"]: row for row in usage["devices"]}
    assert by[device.pk]["device_name"] == "Pocket" and round(by[device.pk]["minutes_today"]) == 12
    assert (
        round(by[kitchen.pk]["minutes_this_week"]) == 20
        and round(by[kitchen.pk]["minutes_last_14_days"]) == 20
    )
    assert round(sum(r["minutes_today"] for r in usage["devices"])) == round(usage["device_minutes_today"])
    assert usage["household_devices"] is None  # everyone's is for admins

    household = token_client(admin_user, scopes=("read",)).get("/api/usage").json()["household_devices"]
    assert {row["device"]: round(row["minutes_today"]) for row in household} == {
        device.pk: 12,
        kitchen.pk: 50,
    }
