"""The issue's "done when", in small: a hub with people, a token, a device, jobs (done with result files, one
rendering, one waiting), quotas and a household channel is backed up while a render runs (a real Celery worker and
the Tiiny emulator over HTTP); the first hub then stops, as a dead machine would. ``manage.py restore`` puts the
backup into a second, empty data folder (its own SQLite file) in a process of its own; the second hub has the same
rows and the same files (sha256), answers its pages and API, and once its own worker and beat run, its waiting job
renders and the render that was running is polled again under its device-side id, never submitted twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest
from django.conf import settings

from backups import services
from hub.accounts.tokens import token_create
from hub.testing import BASE_DIR, start_beat, start_worker, wait_for
from jobs.models import Artifact, HouseholdQuota, Job, PersonQuota
from jobs.queue.services import job_submit
from jobs.tests.conftest import ENGINE_ENV, wait_job
from notify.services import channel_create

pytestmark = pytest.mark.integration

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"
TABLES = (
    "accounts_user",
    "accounts_apitoken",
    "devices_device",
    "jobs_job",
    "jobs_jobevent",
    "jobs_artifact",
    "jobs_householdquota",
    "jobs_personquota",
    "notify_channel",
)


def video(owner, device, prompt: str) -> Job:
    params = {"prompt": prompt, "size": "832x480", "seconds": 2, "steps": 4}
    return job_submit(owner=owner, device=device, kind="video", model_id=VIDEO, params=params)


def rows(db_file: Path, sql: str) -> list[tuple]:
    with closing(sqlite3.connect(db_file, timeout=20)) as db:
        return db.execute(sql).fetchall()


def counts(db_file: Path) -> dict[str, int]:
    return {t: rows(db_file, f"SELECT COUNT(*) FROM {t}")[0][0] for t in TABLES}


def second_hub_env(data: Path, redis_url: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "HUB_TEST_DB", "DJANGO_ALLOW_ASYNC_UNSAFE")
    }
    env |= {
        "HUB_DATA_DIR": str(data),
        "DATABASE_URL": f"sqlite:///{data / 'hub.sqlite3'}",
        "REDIS_URL": redis_url,
        "HUB_SECRET_KEY": settings.SECRET_KEY,  # the same key: sealed device keys and channel secrets open
        "PYTHONUNBUFFERED": "1",
    }
    return env


def manage(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


PAGES_SCRIPT = """
import json
from django.test import Client
from hub.accounts.models import User
from notify import crypto
from notify.models import Channel
client = Client(HTTP_HOST="127.0.0.1")
client.force_login(User.objects.get(username="{user}"))
api = client.get("/api/jobs")
out = {{
    "dashboard": client.get("/").status_code,
    "job": client.get("/jobs/{job}/").status_code,
    "api": api.status_code,
    "api_ids": sorted(j["id"] for j in api.json()["items"]),
    "channel_secret": crypto.unseal(Channel.objects.get(owner=None).sealed).get("secret"),
}}
print(json.dumps(out))
"""


@pytest.mark.timeout(240)
def test_a_hub_backed_up_while_rendering_comes_back_whole_in_a_second_data_folder(
    engine, tiiny, pocket, member, admin_user, tmp_path
):
    # -- the first hub: people, a token, quotas, a household channel, a finished render with its files -------------
    token_create(user=member, name="phone", scopes=["read", "submit"])
    HouseholdQuota.objects.create(pk=1, device_minutes_per_day=120, max_queued=10)
    PersonQuota.objects.create(user=member, storage_mb=500)
    channel_create(
        owner=None, kind="webhook", name="House", url="http://127.0.0.1:9/hook", secret="s3cret-hook"
    )
    done = wait_job(video(member, pocket, "a finished fox"), timeout=60, engine=engine)
    assert done.artifacts.exists()
    # -- a render running on the device (slow clock), and a job waiting behind it -----------------------------------
    tiiny.set_speed(15)  # ~28 s a render here: it runs all through the backup
    rendering = video(member, pocket, "a fox rendering during the backup")
    wait_for(
        lambda: Job.objects.filter(pk=rendering.pk, state="running").exclude(remote_id="").exists(),
        timeout=30,
        what="the render to run on the device",
    )
    waiting = video(admin_user, pocket, "a fox waiting its turn")
    before = counts(Path(settings.DATABASES["default"]["NAME"]))

    root = tmp_path / "backups"
    run = services.take_backup(root)  # the hub runs: its worker polls the render meanwhile
    rendering.refresh_from_db()
    assert rendering.state == "running", "the render should still run when the backup is done"
    engine.release()  # the first machine dies: its worker and beat stop with the render still on the device
    submitted = tiiny.counters()["renders_submitted"]
    assert submitted == 2

    # -- restore into a second, empty data folder, in a process of its own ------------------------------------------
    second = tmp_path / "second-hub"
    second.mkdir()
    env = second_hub_env(second, settings.REDIS_URL.rsplit("/", 1)[0] + "/7")  # its own broker and keys
    done_restore = manage(env, "restore", str(root))
    assert done_restore.returncode == 0, done_restore.stderr + done_restore.stdout
    assert f"Restored {run.name}" in done_restore.stdout
    db2 = second / "hub.sqlite3"
    assert counts(db2) == before  # every person, token, device, job, event, artifact, quota, channel
    snapshot = root / run.name / "database.sqlite3"
    job_rows = "SELECT id, owner_id, state, remote_id, prompt FROM jobs_job ORDER BY id"
    assert rows(db2, job_rows) == rows(snapshot, job_rows)
    assert dict(rows(db2, f"SELECT id, state FROM jobs_job"))[rendering.pk] == "running"  # noqa: F541
    assert dict(rows(db2, "SELECT id, state FROM jobs_job"))[waiting.pk] == "queued"
    for name, digest in Artifact.objects.filter(job=done).values_list("file", "sha256"):
        assert hashlib.sha256((second / "media" / name).read_bytes()).hexdigest() == digest

    # -- the second hub answers its pages and API, and its sealed secrets open (same key) ----------------------------
    script = PAGES_SCRIPT.format(user=member.username, job=done.pk)
    pages = manage(env, "shell", "-c", script)
    assert pages.returncode == 0, pages.stderr
    answer = json.loads(pages.stdout.strip().splitlines()[-1])
    assert (answer["dashboard"], answer["job"], answer["api"]) == (200, 200, 200)
    assert set(answer["api_ids"]) >= {done.pk, rendering.pk}
    assert answer["channel_secret"] == "s3cret-hook"

    # -- its queue resumes: the waiting job renders, the running one is polled again (not submitted twice) ----------
    tiiny.set_speed(600)
    worker = start_worker("second", concurrency=2, **env, **ENGINE_ENV)
    beat = start_beat(**env, **ENGINE_ENV)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            states = dict(rows(db2, "SELECT id, state FROM jobs_job"))
            if states[rendering.pk] == "done" and states[waiting.pk] == "done":
                break
            time.sleep(0.5)
        story = rows(
            db2,
            f"SELECT job_id, seq, state, message FROM jobs_jobevent WHERE job_id IN ({rendering.pk}, {waiting.pk}) ORDER BY job_id, seq",
        )
        assert (states[rendering.pk], states[waiting.pk]) == ("done", "done"), (story, worker.log_tail(60))
    finally:
        worker.stop()
        beat.stop()
    assert tiiny.counters()["renders_submitted"] == submitted + 1  # only the waiting job was submitted
    files = rows(db2, f"SELECT file, sha256 FROM jobs_artifact WHERE job_id = {rendering.pk}")
    assert files and all(
        hashlib.sha256((second / "media" / name).read_bytes()).hexdigest() == digest for name, digest in files
    )
