"""The issue's "done when", in small: a hub with people, a token, a device, jobs (done with result files, one of
every kind, one rendering, one waiting), quotas and a household channel is backed up while a render runs (a real Celery worker and
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
from django.db import connection

from backups import services
from hub import testing as hub_testing
from hub.accounts.tokens import token_create
from hub.testing import BASE_DIR, start_beat, start_worker, wait_for
from jobs.models import Artifact, HouseholdQuota, Job, PersonQuota
from jobs.queue.services import job_submit
from jobs.tests.conftest import ENGINE_ENV, wait_job
from jobs.tests.ui_fixtures import add_artifact, make_job
from notify.services import channel_create

pytestmark = pytest.mark.integration

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"
# The kinds the emulated render below does not cover, as finished jobs with a result file each.
OTHER_KINDS = (
    ("mesh", "mesh", "model.glb", "model/gltf-binary"),
    ("music", "audio", "music.wav", "audio/wav"),
    ("image", "image", "image-1.png", "image/png"),
    ("speech", "audio", "speech.wav", "audio/wav"),
)
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


class SecondDatabase:
    """The second hub's database: a SQLite file in its data folder, or a PostgreSQL database of its own beside the
    test database (made empty here, dropped at the end). ``rows`` reads it over a connection of the test's own."""

    def __init__(self, data: Path) -> None:
        self.data = data
        db = connection.settings_dict
        if connection.vendor == "sqlite":
            self.url = f"sqlite:///{data / 'hub.sqlite3'}"
            return
        self.name = f"{db['NAME']}_restored"
        self.url = f"{hub_testing.test_database_url().rsplit('/', 1)[0]}/{self.name}"
        self._admin(f'DROP DATABASE IF EXISTS "{self.name}"', f'CREATE DATABASE "{self.name}"')

    def _connect(self, dbname: str):
        import psycopg  # (PostgreSQL runs only)

        db = connection.settings_dict
        return psycopg.connect(
            host=db.get("HOST") or "127.0.0.1", port=db.get("PORT") or 5432, user=db.get("USER") or None,
            password=db.get("PASSWORD") or None, dbname=dbname, autocommit=True,
        )  # fmt: skip

    def _admin(self, *statements: str) -> None:
        with closing(self._connect("postgres")) as admin:
            for sql in statements:
                admin.execute(sql)

    def rows(self, sql: str) -> list[tuple]:
        if connection.vendor == "sqlite":
            with closing(sqlite3.connect(self.data / "hub.sqlite3", timeout=20)) as db:
                return db.execute(sql).fetchall()
        with closing(self._connect(self.name)) as db:
            return [tuple(row) for row in db.execute(sql).fetchall()]

    def drop(self) -> None:
        if connection.vendor != "sqlite":
            self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def counts(self) -> dict[str, int]:
        return {t: self.rows(f"SELECT COUNT(*) FROM {t}")[0][0] for t in TABLES}


def first_hub_rows(sql: str) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return [tuple(row) for row in cursor.fetchall()]


def first_hub_counts() -> dict[str, int]:
    return {t: first_hub_rows(f"SELECT COUNT(*) FROM {t}")[0][0] for t in TABLES}


def second_hub_env(data: Path, database_url: str, redis_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HUB_TEST_DB", "DJANGO_ALLOW_ASYNC_UNSAFE")}
    env |= {
        "HUB_DATA_DIR": str(data),
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "HUB_SECRET_KEY": settings.SECRET_KEY,  # the same key: sealed device keys and channel secrets open
        "PYTHONUNBUFFERED": "1",
    }
    return env


@pytest.fixture
def second_hub(tmp_path):
    data = tmp_path / "second-hub"
    data.mkdir()
    db = SecondDatabase(data)
    yield db
    db.drop()


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
    "gallery": client.get("/jobs/").status_code,
    "jobs": sorted({{client.get(f"/jobs/{{pk}}/").status_code for pk in {jobs}}}),
    "api": api.status_code,
    "api_ids": sorted(j["id"] for j in api.json()["items"]),
    "channel_secret": crypto.unseal(Channel.objects.get(owner=None).sealed).get("secret"),
}}
print(json.dumps(out))
"""


@pytest.mark.timeout(240)
def test_a_hub_backed_up_while_rendering_comes_back_whole_in_a_second_data_folder(
    engine, tiiny, pocket, member, admin_user, tmp_path, second_hub
):
    # -- the first hub: people, a token, quotas, a household channel, a finished render with its files -------------
    token_create(user=member, name="phone", scopes=["read", "submit"])
    HouseholdQuota.objects.create(pk=1, device_minutes_per_day=120, max_queued=10)
    PersonQuota.objects.create(user=member, storage_mb=500)
    channel_create(
        owner=None, kind="webhook", name="House", url="https://hooks.invalid/hook", secret="s3cret-hook"
    )
    done = wait_job(video(member, pocket, "a finished fox"), timeout=60, engine=engine)
    assert done.artifacts.exists()
    others = []
    for kind, artifact_kind, name, mime in OTHER_KINDS:
        job = make_job(member, pocket, kind=kind, state="done", prompt=f"a finished {kind}")
        data = f"{kind} result ".encode() * 2000
        art = add_artifact(job, settings.MEDIA_ROOT, kind=artifact_kind, name=name, mime=mime, data=data)
        Artifact.objects.filter(pk=art.pk).update(sha256=hashlib.sha256(data).hexdigest())
        others.append(job)
    # -- a render running on the device (slow clock), and a job waiting behind it -----------------------------------
    tiiny.set_speed(
        5
    )  # ~80 s a render here: it runs all through the backup and the checks below, even on a busy box
    rendering = video(member, pocket, "a fox rendering during the backup")
    wait_for(
        lambda: Job.objects.filter(pk=rendering.pk, state="running").exclude(remote_id="").exists(),
        timeout=30,
        what="the render to run on the device",
    )
    waiting = video(admin_user, pocket, "a fox waiting its turn")
    root = tmp_path / "backups"
    run = services.take_backup(root)  # the hub runs: its worker polls the render meanwhile
    rendering.refresh_from_db()
    assert rendering.state == "running", "the render should still run when the backup is done"
    # The first machine dies (SIGKILL: a warm shutdown would let its worker go on polling the render, even collect
    # it, while the second hub starts): its worker and beat stop with the render still on the device.
    for proc in [*engine.workers.values(), engine.beat]:
        if proc is not None:
            proc.kill()
    engine.release()
    submitted = tiiny.counters()["renders_submitted"]
    assert submitted == 2
    job_rows = "SELECT id, owner_id, state, remote_id, prompt FROM jobs_job ORDER BY id"
    before, jobs_before = first_hub_counts(), first_hub_rows(job_rows)  # (the first hub is still now)
    # the results finished before the backup (the render still running has none yet, whatever the timing)
    files_before = list(Artifact.objects.filter(job__in=[done, *others]).values_list("file", "sha256"))

    # -- restore into a second, empty data folder, in a process of its own ------------------------------------------
    second = second_hub.data
    env = second_hub_env(second, second_hub.url, settings.REDIS_URL.rsplit("/", 1)[0] + "/7")  # own broker
    done_restore = manage(env, "restore", str(root))
    assert done_restore.returncode == 0, done_restore.stderr + done_restore.stdout
    assert f"Restored {run.name}" in done_restore.stdout
    assert second_hub.counts() == before  # every person, token, device, job, event, artifact, quota, channel
    assert second_hub.rows(job_rows) == jobs_before
    states = dict(second_hub.rows("SELECT id, state FROM jobs_job"))
    assert (states[rendering.pk], states[waiting.pk]) == ("running", "queued")
    assert len(files_before) >= 1 + len(OTHER_KINDS)
    for name, digest in files_before:  # every kind's result, byte for byte
        assert hashlib.sha256((second / "media" / name).read_bytes()).hexdigest() == digest, name

    # -- the second hub answers its pages and API, and its sealed secrets open (same key) ----------------------------
    script = PAGES_SCRIPT.format(user=member.username, jobs=[done.pk, *(j.pk for j in others)])
    pages = manage(env, "shell", "-c", script)
    assert pages.returncode == 0, pages.stderr
    answer = json.loads(pages.stdout.strip().splitlines()[-1])
    assert (answer["dashboard"], answer["gallery"], answer["jobs"], answer["api"]) == (200, 200, [200], 200)
    assert set(answer["api_ids"]) >= {done.pk, rendering.pk, *(j.pk for j in others)}
    assert answer["channel_secret"] == "s3cret-hook"

    # -- its queue resumes: the waiting job renders, the running one is polled again (not submitted twice) ----------
    tiiny.set_speed(600)
    worker = start_worker("second", concurrency=2, **env, **ENGINE_ENV)
    beat = start_beat(**env, **ENGINE_ENV)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            states = dict(second_hub.rows("SELECT id, state FROM jobs_job"))
            if states[rendering.pk] == "done" and states[waiting.pk] == "done":
                break
            time.sleep(0.5)
        story = second_hub.rows(
            f"SELECT job_id, seq, state, message FROM jobs_jobevent WHERE job_id IN ({rendering.pk}, {waiting.pk}) ORDER BY job_id, seq",
        )
        assert (states[rendering.pk], states[waiting.pk]) == ("done", "done"), (story, worker.log_tail(60))
    finally:
        worker.stop()
        beat.stop()
    assert tiiny.counters()["renders_submitted"] == submitted + 1, story  # only the waiting job was submitted
    files = second_hub.rows(f"SELECT file, sha256 FROM jobs_artifact WHERE job_id = {rendering.pk}")
    assert files and all(
        hashlib.sha256((second / "media" / name).read_bytes()).hexdigest() == digest for name, digest in files
    )
