"""Upgrades: a hub filled at an earlier schema (jobs, events, artifacts, quotas, channels) is backed up before its
migrations (``manage.py backup --if-migrations-pending``, as ``make up`` runs it), migrated to head, and its pages
and API answer with its rows.

The earlier schema: every app as far back as the models the household's data lives in reach (the quotas arrived in
jobs 0006; tokens, invitations and personal settings in accounts 0002-0003, the backup failure event in notify 0002
and the backups app itself are all taken away). Rows are written through the historical models, as the hub of
that time wrote them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json

import pytest
from django.contrib.auth.hashers import make_password
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.utils import timezone

from backups import services
from hub.accounts.models import User
from jobs.models import Artifact, Job, PersonQuota
from notify.crypto import seal
from notify.models import Channel

pytestmark = pytest.mark.django_db(transaction=True)

EARLIER = [
    ("accounts", "0001_initial"),
    ("devices", "0003_state_message_without_address"),
    ("jobs", "0006_quotas"),
    ("notify", "0001_initial"),
    ("backups", None),
]
RESULT = b"\x00\x00\x00\x18ftypmp42 an old render"


def migrate_to(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection)  # a fresh loader: what is applied now


def fill_old_hub(old_apps, media) -> dict:
    """A household as the hub at the earlier schema kept it."""
    user_model = old_apps.get_model("accounts", "User")
    owner = user_model.objects.create(
        username="olive", password=make_password("old-password-1"), role="member", is_active=True
    )
    device = old_apps.get_model("devices", "Device").objects.create(
        name="Old Pocket", kind="tiiny", base_url="http://127.0.0.1:9"
    )
    job_model = old_apps.get_model("jobs", "Job")
    now = timezone.now()
    done = job_model.objects.create(
        owner=owner,
        device=device,
        kind="video",
        model_id="MiniMaxAI/MiniMax-H3-Turbo",
        params={"prompt": "an old fox", "size": "832x480", "seconds": 2, "steps": 4},
        prompt="an old fox",
        state="done",
        started_at=now - dt.timedelta(minutes=9),
        finished_at=now - dt.timedelta(minutes=1),
        progress=100.0,
        last_seq=2,
    )
    waiting = job_model.objects.create(
        owner=owner, device=device, kind="image", model_id="Tongyi-MAI/Z-Image-Turbo",
        params={"prompt": "an old lighthouse", "size": "512x512", "n": 1, "steps": 8},
        prompt="an old lighthouse", state="queued", last_seq=1,
    )  # fmt: skip
    event_model = old_apps.get_model("jobs", "JobEvent")
    event_model.objects.create(job=done, seq=1, state="queued", message="Queued.")
    event_model.objects.create(job=done, seq=2, state="done", message="Done.")
    event_model.objects.create(job=waiting, seq=1, state="queued", message="Queued.")
    name = f"results/{owner.pk}/{done.pk}/video.mp4"
    (media / name).parent.mkdir(parents=True)
    (media / name).write_bytes(RESULT)
    old_apps.get_model("jobs", "Artifact").objects.create(
        job=done, kind="video", file=name, name="video.mp4", mime="video/mp4",
        bytes=len(RESULT), sha256=hashlib.sha256(RESULT).hexdigest(),
    )  # fmt: skip
    old_apps.get_model("jobs", "HouseholdQuota").objects.create(pk=1, device_minutes_per_day=90, max_queued=5)
    old_apps.get_model("jobs", "PersonQuota").objects.create(user=owner, storage_mb=250)
    old_apps.get_model("notify", "Channel").objects.create(
        owner=None, kind="webhook", name="House", sealed=seal({"url": "http://127.0.0.1:9/h", "secret": "s"}),
        display="http://127.0.0.1:9/… · signed", on_queue_empty=True,
    )  # fmt: skip
    return {"owner": owner.pk, "done": done.pk, "waiting": waiting.pk}


def test_a_hub_filled_at_an_earlier_schema_is_backed_up_migrated_and_answers(
    media, tmp_path, settings, capsys
):
    executor = migrate_to(EARLIER)
    try:
        old_apps = executor.loader.project_state([t for t in EARLIER if t[1]]).apps
        ids = fill_old_hub(old_apps, media)

        # make up, before it migrates: without a backup folder it says how, and goes on (exit 0)
        settings.HUB_BACKUP_DIR = ""
        call_command("backup", "--if-migrations-pending")
        said = capsys.readouterr().out
        assert "migration(s) to apply to a hub that holds data" in said
        assert "HUB_BACKUP_DIR=/path/to/backups make up" in said and "manage.py backup --to DIR" in said

        # with one, it takes a backup of the database as it is, before any migration runs
        settings.HUB_BACKUP_DIR = str(tmp_path / "backups")
        call_command("backup", "--if-migrations-pending")
        assert "Backup hub-backup-" in capsys.readouterr().out
        (name,) = services.backup_names(tmp_path / "backups")
        manifest = json.loads((tmp_path / "backups" / name / "manifest.json").read_text())
        assert "0007_prompt_trigram_index" not in manifest["migrations"]["jobs"]
        assert "backups" not in manifest["migrations"]
        assert manifest["counts"]["jobs.Job"]["rows"] == 2
        assert [f["name"] for f in manifest["files"]] == [f"results/{ids['owner']}/{ids['done']}/video.mp4"]
    finally:
        call_command("migrate", verbosity=0)  # to head, whatever happened (the next tests need it)

    # after the migrations: every row is there and the pages and the API answer the owner
    assert not MigrationExecutor(connection).migration_plan(
        MigrationExecutor(connection).loader.graph.leaf_nodes()
    )
    owner = User.objects.get(pk=ids["owner"])
    assert Job.objects.filter(owner=owner).count() == 2 and Artifact.objects.get().bytes == len(RESULT)
    assert PersonQuota.objects.get(user=owner).storage_mb == 250
    # the new flag's default reached the old household channel
    assert Channel.objects.get(owner=None).on_backup_failed is True
    client = Client()
    client.force_login(owner)
    dashboard = client.get("/")
    assert dashboard.status_code == 200 and "an old fox" in dashboard.content.decode()
    page = client.get(f"/jobs/{ids['done']}/")
    assert page.status_code == 200 and "an old fox" in page.content.decode()
    download = client.get(f"/jobs/{ids['done']}/files/{Artifact.objects.get().pk}/")
    assert download.status_code == 200 and b"".join(download.streaming_content) == RESULT
    api = client.get("/api/jobs")
    assert api.status_code == 200
    assert {j["id"] for j in api.json()["items"]} == {ids["done"], ids["waiting"]}
    # and nothing more is pending: the next `make up` takes no backup
    call_command("backup", "--if-migrations-pending")
    assert capsys.readouterr().out == ""
