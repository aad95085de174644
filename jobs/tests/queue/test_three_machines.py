"""Issue 26's end-to-end test: the web server with one data folder, a worker (``make worker``'s script) with
another, sharing only the database, Redis and an S3 bucket (moto's server on loopback); the emulator is the device.

A video is queued and rendered; the worker is SIGKILLed mid-render and a second worker finishes the job (the
render submitted once); the result and its thumbnail are in the bucket; the web server downloads it whole and
by ranges with a matching sha256 and shows it in the gallery with its thumbnail; nothing is written under the web
process's data folder but its logs.

In CI's PostgreSQL pass the database is a real shared server; on SQLite both processes open the same file.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
from pathlib import Path

import pytest

from conftest import PASSWORD
from hub import runrecord
from hub.testing import Proc, child_env, process_tree, sign_in, sign_in_page, start_asgi_server, wait_for
from jobs.tests.conftest import ENGINE_ENV, wait_job
from jobs.tests.files.media_checks import assert_device_video
from jobs.tests.queue.test_engine_tiiny import video

pytestmark = pytest.mark.integration

BASE = Path(__file__).resolve().parents[3]


def make_worker(engine, name: str, data_dir: Path, **env: str) -> Proc:
    """``make worker`` (scripts/worker.py) with its own data folder; ready once its log says so."""
    proc = Proc(
        f"make-worker-{name}",
        [sys.executable, str(BASE / "scripts" / "worker.py")],
        child_env(**ENGINE_ENV, HUB_DATA_DIR=str(data_dir), HUB_DEBUG_LOGGERS="jobs", **env),
        data_dir / "console.log",
    ).start()
    engine.workers[name] = proc  # stopped with the engine's own
    log = data_dir / "logs" / "worker.log"
    wait_for(
        lambda: log.exists() and " ready." in log.read_text(), timeout=60, what=f"worker {name}", proc=proc
    )
    return proc


def crash(proc: Proc) -> None:
    """SIGKILL the script, its keepalive and the Celery worker with its pool, all at once: a machine that died."""
    pids = process_tree(proc.process.pid)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.process.wait(timeout=10)
    wait_for(lambda: all(runrecord.state(pid) in ("", "Z") for pid in pids), timeout=10,
             what="every process of the worker to end")  # fmt: skip


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_web_and_worker_share_only_the_database_redis_and_the_bucket(
    engine, tiiny, pocket, member, s3_store, tmp_path
):
    engine.stop_all()  # the engine's e1 uses the suite's data folder and local files: not part of this hub
    web_dir, first_dir, second_dir = (tmp_path / n for n in ("web", "worker-1", "worker-2"))
    for folder in (web_dir, first_dir, second_dir):
        folder.mkdir()
    web = start_asgi_server(workers=1, HUB_DATA_DIR=str(web_dir), **s3_store.env)
    try:
        first = make_worker(engine, "first", first_dir, HUB_WORKER_DEVICES=pocket.name, **s3_store.env)

        tiiny.set_speed(50)  # ~8 s of render: room to kill the worker in the middle
        job = video(member, pocket)

        def rendering() -> bool:
            job.refresh_from_db()
            return job.state == "running" and bool(job.remote_id)

        wait_for(rendering, timeout=60, what="the render to start", proc=first)
        remote_id = job.remote_id
        crash(first)
        engine.workers.pop("first")
        second = make_worker(engine, "second", second_dir, HUB_WORKER_DEVICES=pocket.name, **s3_store.env)
        wait_job(job, timeout=90, engine=engine)

        assert job.remote_id == remote_id and tiiny.counters()["renders_submitted"] == 1  # finished once
        assert f"trace job={job.pk} step=collecting" in (second_dir / "logs" / "worker.log").read_text()
        result = job.artifacts.exclude(kind="thumb").get()
        wait_for(
            lambda: job.artifacts.filter(kind="thumb").exists(), timeout=30, what="the thumbnail", proc=second
        )
        thumb = job.artifacts.get(kind="thumb")
        assert {result.file.name, thumb.file.name} <= set(s3_store.keys())  # in the bucket
        stored = s3_store.get(result.file.name)
        assert hashlib.sha256(stored).hexdigest() == result.sha256 and len(stored) == result.bytes > 1000

        client = sign_in(web.extra["url"], member.username, PASSWORD)
        url = f"/jobs/{job.pk}/files/{result.pk}/"
        whole = client.get(url)
        assert whole.status_code == 200 and hashlib.sha256(whole.content).hexdigest() == result.sha256
        part = client.get(url, headers={"Range": "bytes=100-1099"})
        assert part.status_code == 206 and part.content == stored[100:1100]
        assert part.headers["Content-Range"] == f"bytes 100-1099/{result.bytes}"
        tail = client.get(url, headers={"Range": f"bytes={result.bytes - 500}-"})
        assert tail.status_code == 206 and tail.content == stored[-500:]
        assert client.get(url, headers={"Range": f"bytes={result.bytes}-"}).status_code == 416

        gallery = client.get("/jobs/")
        thumb_url = f"/jobs/{job.pk}/files/{thumb.pk}/"
        assert gallery.status_code == 200 and thumb_url in gallery.text
        shown = client.get(thumb_url)
        assert shown.status_code == 200 and shown.content == s3_store.get(thumb.file.name)

        assert [f for f in files_under(web_dir) if not f.startswith("logs/")] == []
    finally:
        web.stop()
        # Its workers go with it, every process of them: a worker of this hub that lived on would take the next
        # test's device (the same name and, on PostgreSQL, the same id) and keep its results in this bucket.
        for name in ("first", "second"):
            if (proc := engine.workers.pop(name, None)) is not None:
                crash(proc)


PLAY = """async (id) => {
  const v = document.getElementById(id);
  v.muted = true;
  if (v.readyState < 1) await new Promise((ok) => v.addEventListener('loadedmetadata', ok, {once: true}));
  const seeked = new Promise((ok) => v.addEventListener('seeked', ok, {once: true}));
  v.currentTime = 1.2;
  await seeked;
  await v.play();
  await new Promise((ok) => setTimeout(ok, 600));
  v.pause();
  const ends = Array.from({length: v.seekable.length}, (_, i) => v.seekable.end(i));
  return {current: v.currentTime, duration: v.duration, seekable: ends, error: v.error && v.error.code};
}"""


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_result_in_the_bucket_plays_and_seeks_in_chromium(browser, member, device, s3_store, tmp_path):
    """The browser half of the issue's test (Chromium is only in the browser pass): a video the worker stored in
    the bucket plays from a web server with a data folder of its own, by ranges, and seeks."""
    from devices.emulator.media import video_mp4  # reason: ffmpeg's media generator, only here
    from jobs.files import store  # reason: the test process stores the result as a worker would
    from jobs.tests.ui_fixtures import make_job  # reason: the ui fixtures' job maker

    job = make_job(member, device, state="done", prompt="a kite over the dunes at sunset")
    source = video_mp4(prompt=job.prompt, seconds=4, width=320, height=192, fps=24).read_bytes()
    art = store.save_artifact(job, kind="video", name="video.mp4", data=source, mime="video/mp4")
    assert_device_video(source, s3_store.get(art.file.name))
    web_dir = tmp_path / "web"
    web_dir.mkdir()
    web = start_asgi_server(workers=1, HUB_DATA_DIR=str(web_dir), **s3_store.env)
    context = browser.new_context(base_url=web.extra["url"])
    try:
        page = context.new_page()
        sign_in_page(page, member.username, PASSWORD)
        ranges: list[str] = []
        page.on(
            "request", lambda r: ranges.append(r.headers.get("range", "")) if "/files/" in r.url else None
        )
        page.goto(f"/jobs/{job.pk}/")
        state = page.evaluate(PLAY, f"job-{job.pk}-video")
        assert state["error"] is None and state["duration"] >= 3.5, state
        assert state["current"] > 1.3, state  # it played on from where it seeked
        assert state["seekable"] and max(state["seekable"]) >= 3.5, state  # the whole file: served by ranges
        assert any(r.startswith("bytes=") for r in ranges), ranges
        assert [f for f in files_under(web_dir) if not f.startswith("logs/")] == []
    finally:
        context.close()
        web.stop()
