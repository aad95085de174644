"""Where a backup's outcome shows: the health page, /healthz details, /metrics, the household channels, the footer."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from backups.models import BackupRun
from backups.services import daily_backup
from hub.tests.test_metrics import scrape, value
from hub.version import __version__
from notify.models import Delivery, Event
from notify.services import build_message, channel_create


def run(ok: bool, *, hours_ago: float, **fields) -> BackupRun:
    finished = timezone.now() - dt.timedelta(hours=hours_ago)
    return BackupRun.objects.create(
        started=finished - dt.timedelta(minutes=3),
        finished=finished,
        ok=ok,
        directory="/srv/backups",
        **fields,
    )


@pytest.fixture
def two_runs(db):
    good = run(
        True,
        hours_ago=25,
        name="hub-backup-20261203-133000",
        size_bytes=5 * 1024**2,
        files=7,
        linked=5,
        copied=2,
    )
    bad = run(False, hours_ago=1, name="", error="can't write to /srv/backups: No space left on device")
    return good, bad


def test_the_health_page_shows_the_last_backup_and_the_last_good_one(admin_client, two_runs, settings):
    settings.HUB_BACKUP_DIR = "/srv/backups"
    page = admin_client.get("/health/").content.decode()
    assert "No space left on device" in page and "failed" in page
    assert "The last good backup: hub-backup-20261203-133000" in page
    assert "Daily at 13:30 into <code>/srv/backups</code>" in page
    assert f"Tiiny Hub {__version__}" in page


def test_the_health_page_says_how_to_start_backing_up(admin_client, settings):
    settings.HUB_BACKUP_DIR = ""
    page = admin_client.get("/health/").content.decode()
    assert "No backup has been taken yet." in page and "HUB_BACKUP_DIR" in page


def test_healthz_details_carry_the_version_and_the_last_backup(two_runs, redis_client):
    body = Client().get("/healthz").json()  # loopback: details allowed
    assert body["details"]["version"]["version"] == __version__
    last = body["details"]["backup"]["last"]
    assert last["ok"] is False and "No space left" in last["error"]
    assert body["details"]["backup"]["last_ok"]["size_bytes"] == 5 * 1024**2
    assert "database" in body  # the checks are still there, and a failed backup fails none of them


def test_metrics_show_the_last_backup(two_runs):
    good, bad = two_runs
    samples = scrape()
    assert value(samples, "tiiny_hub_backup_last_ok") == 0
    assert value(samples, "tiiny_hub_backup_last_run_timestamp_seconds") == pytest.approx(
        bad.finished.timestamp()
    )
    assert value(samples, "tiiny_hub_backup_last_success_timestamp_seconds") == pytest.approx(
        good.finished.timestamp()
    )
    assert value(samples, "tiiny_hub_backup_last_size_bytes") == 5 * 1024**2
    assert value(samples, "tiiny_hub_backup_last_files", how="linked") == 5
    assert any(name == "tiiny_hub_version_info" for name, _ in samples)


def test_metrics_before_any_backup(db):
    samples = scrape()
    assert value(samples, "tiiny_hub_backup_last_ok") == 0
    assert value(samples, "tiiny_hub_backup_last_success_timestamp_seconds") == 0


def test_a_failed_daily_backup_tells_the_household(db, member, tmp_path, settings):
    household = channel_create(owner=None, kind="email", name="House", address="house@example.org")
    quiet = channel_create(
        owner=None, kind="email", name="Quiet", address="q@example.org", on_backup_failed=False
    )
    personal = channel_create(owner=member, kind="email", name="Mine", address="me@example.org")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    settings.HUB_BACKUP_DIR = str(blocker / "backups")
    assert daily_backup() == "failed"
    (delivery,) = Delivery.objects.all()
    assert delivery.channel == household and delivery.event == Event.BACKUP_FAILED
    assert quiet.pk != delivery.channel_id != personal.pk
    message = build_message(delivery)
    assert message.title == "The daily backup failed" and message.path == "/health/"
    assert BackupRun.objects.get().trigger == BackupRun.Trigger.NIGHTLY


def test_no_daily_backup_without_a_folder(db, settings):
    settings.HUB_BACKUP_DIR = ""
    assert daily_backup() == "off"
    assert not BackupRun.objects.exists()


def test_the_footer_names_the_version_to_people_signed_in(member_client):
    assert f'<span id="footer-version">{__version__}</span>' in member_client.get("/").content.decode()
    login = Client().get("/accounts/login/")
    assert login.status_code == 200 and "footer" in login.content.decode()
    assert "footer-version" not in login.content.decode()


def test_manage_py_version(capsys):
    call_command("hub_version")
    assert capsys.readouterr().out.startswith(f"Tiiny Hub {__version__}")
