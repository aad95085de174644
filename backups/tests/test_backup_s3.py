"""A backup of a hub whose store is an S3 bucket (moto's server): the bucket's objects are in the backup, checked
by sha256, unchanged ones shared with the previous backup; the manifest and the console say where they came from."""

from __future__ import annotations

import hashlib
import io
import json

import pytest
from django.core.management import call_command

from backups import services
from jobs.files import store
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_buckets_objects_are_backed_up_and_shared_when_unchanged(
    s3_store, member, device, media, tmp_path
):
    job = make_job(member, device, state="done")
    video = store.save_artifact(job, kind="video", name="video.mp4", data=b"v" * 300_000)
    poster = store.save_artifact(job, kind="image", name="poster.png", data=b"png" * 10)
    root = tmp_path / "backups"
    out = io.StringIO()
    call_command("backup", "--to", str(root), stdout=out)
    assert f"objects of the result store {s3_store.url}" in out.getvalue()
    (first,) = services.backup_names(root)
    manifest = json.loads((root / first / "manifest.json").read_text())
    assert manifest["store"] == s3_store.url
    entries = {e["name"]: e for e in manifest["files"]}
    assert entries[str(video.file)]["sha256"] == hashlib.sha256(b"v" * 300_000).hexdigest()
    assert (root / first / "files" / str(video.file)).read_bytes() == b"v" * 300_000
    assert entries[str(video.file)]["etag"]

    store.save_bytes(str(poster.file), b"new poster")  # changed in the bucket
    second = services.take_backup(root)
    assert (second.copied, second.linked, second.files) == (1, 1, 2)
    a, b = root / first / "files" / str(video.file), root / second.name / "files" / str(video.file)
    assert a.stat().st_ino == b.stat().st_ino  # the unchanged object was not downloaded again
    assert (root / second.name / "files" / str(poster.file)).read_bytes() == b"new poster"
    assert not [p for p in media.rglob("*") if p.is_file()] if media.exists() else True
