"""``manage.py media_move --to s3://...``: every file of the local store copied to a bucket (moto's server) and
checked by sha256, resumed after an interruption, the line to set printed, the old files kept until
``--delete-source``."""

from __future__ import annotations

import hashlib
import io

import pytest
from django.core.files.storage import default_storage, storages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from hub.tests.s3 import KEY, SECRET, new_bucket
from jobs.files import store
from jobs.files.move import move
from jobs.files.previews import keep_preview
from jobs.tests.ui_fixtures import PNG, make_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def local_files(media, member, device):
    """Two jobs' results, a thumbnail, an input and a live preview, on the local disk; name -> bytes."""
    files = {}
    for n in range(2):
        job = make_job(member, device, state="done")
        data = bytes([n]) * (50_000 + n)
        art = store.save_artifact(job, kind="video", name="video.mp4", data=data)
        files[str(art.file)] = data
        thumb = store.save_artifact(job, kind="thumb", name="thumb.webp", data=b"RIFF....WEBP" + bytes([n]))
        files[str(thumb.file)] = b"RIFF....WEBP" + bytes([n])
    files[store.save_input(job, "image", SimpleUploadedFile("a.png", PNG, content_type="image/png"))] = PNG
    keep_preview(job, PNG)
    files[store.preview_name(job)] = PNG
    (media / str(art.file)).with_name(".video.mp4.1.2.part").write_bytes(b"half")  # never moved
    return files


@pytest.fixture
def keys(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("media_move", *args, stdout=out)
    return out.getvalue()


def test_every_file_is_copied_checked_and_the_line_to_set_printed(local_files, media, moto_s3, keys):
    bucket = new_bucket(moto_s3)
    out = run("--to", bucket.url)
    assert bucket.keys() == sorted(local_files)
    for name, data in local_files.items():
        assert hashlib.sha256(bucket.get(name)).digest() == hashlib.sha256(data).digest()
    assert out.splitlines()[-1] == f"HUB_MEDIA_STORAGE={bucket.url}"
    assert "cannot change the running hub's environment" in out and "--delete-source" in out
    assert f"{len(local_files)} file(s) copied" in out
    assert all((media / name).exists() for name in local_files)  # the old files stay
    again = run("--to", bucket.url)
    assert f"0 file(s) copied (0.0 MB), {len(local_files)} already there and checked" in again


def test_an_interrupted_move_resumes_where_it_stopped(local_files, moto_server, keys):
    server = moto_server()
    bucket = new_bucket(server)
    target = storages.create_storage(bucket.setting)
    seen = []

    def lose_the_store_after_two(name, what):
        seen.append(what)
        if seen.count("copied") == 2 and server.running:
            server.stop()

    first = move(default_storage, target, said=lose_the_store_after_two)
    assert len(first.copied) == 2 and len(first.failed) == len(local_files) - 2
    assert all("the result store is unreachable" in why for why in first.failed.values())

    server.start()  # the store is back (same port, same buckets)
    out = run("--to", bucket.url, "-v", "2")
    for name in first.copied:
        assert f"{name}: already there" in out
    assert f"{len(local_files) - 2} file(s) copied" in out
    assert bucket.keys() == sorted(local_files)


def test_a_result_damaged_on_disk_is_reported_not_copied(local_files, media, moto_s3, keys):
    bucket = new_bucket(moto_s3)
    damaged = next(name for name in local_files if name.endswith("video.mp4"))
    (media / damaged).write_bytes(b"not what was saved")
    with pytest.raises(CommandError, match="run the same command again"):
        run("--to", bucket.url)
    assert damaged not in bucket.keys() and len(bucket.keys()) == len(local_files) - 1


def test_delete_source_removes_only_verified_copies(local_files, media, moto_s3, keys):
    bucket = new_bucket(moto_s3)
    out = run("--to", bucket.url, "--delete-source")
    assert f"{len(local_files)} removed from the old store" in out
    assert not [p for p in media.rglob("*") if p.is_file() and not p.name.endswith(".part")]
    assert bucket.keys() == sorted(local_files)


@pytest.mark.parametrize(
    ("to", "words"),
    [("ftp://x", "unknown store"), ("file:", "must name a bucket"), ("s3://bucket", "AWS_ACCESS_KEY_ID")],
)
def test_a_wrong_target_is_one_line(to, words, media, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    with pytest.raises(CommandError, match=words):
        run("--to", to)
