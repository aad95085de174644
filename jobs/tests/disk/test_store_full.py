"""Writes that find the disk full leave nothing half-written: the store's saves (atomic: a temporary file, then a
rename), a device download (``save_stream``), and a job's leftovers (``discard_partials``).

Two ways to a full disk: the real one, a 1 MB tmpfs filled up (when the machine lets us mount one), and the
outermost seam, the file's ``write`` raising ``ENOSPC`` after the first chunk."""

from __future__ import annotations

import errno
import io
from pathlib import Path

import httpx
import pytest

from hub.disk import is_disk_full
from hub.testing import tmpfs
from jobs.files import store

pytestmark = pytest.mark.django_db


@pytest.fixture
def tiny_disk(tmp_path):
    with tmpfs(tmp_path / "tiny", "size=1m") as folder:
        yield folder


@pytest.fixture
def media_on(settings):
    def use(folder: Path) -> Path:
        settings.MEDIA_ROOT = str(folder)
        return folder

    return use


class FullAfterFirstChunk(io.FileIO):
    """A file whose second write finds the disk full (the outermost seam: what ``open`` hands back)."""

    writes = 0

    def write(self, data):
        FullAfterFirstChunk.writes += 1
        if FullAfterFirstChunk.writes > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(data)


def test_a_save_on_a_full_disk_keeps_the_old_file_and_leaves_no_part(tiny_disk, media_on):
    media_on(tiny_disk)
    store.save_bytes("results/1/1/a.bin", b"old")
    with pytest.raises(OSError) as raised:
        store.save_chunks("results/1/1/a.bin", (b"x" * 256 * 1024 for _ in range(8)))  # 2 MB > 1 MB
    assert is_disk_full(raised.value)
    folder = tiny_disk / "results" / "1" / "1"
    assert sorted(p.name for p in folder.iterdir()) == ["a.bin"]
    assert (folder / "a.bin").read_bytes() == b"old"


def test_a_save_whose_write_fails_at_the_seam_leaves_no_part(tmp_path, media_on, monkeypatch):
    media_on(tmp_path)
    FullAfterFirstChunk.writes = 0
    monkeypatch.setattr(store, "open", lambda path, mode="r": FullAfterFirstChunk(path, "wb"), raising=False)
    with pytest.raises(OSError) as raised:
        store.save_chunks("results/1/2/b.bin", (b"1", b"2"))
    assert raised.value.errno == errno.ENOSPC
    assert list((tmp_path / "results" / "1" / "2").iterdir()) == []


def test_a_download_on_a_full_disk_leaves_no_part(tiny_disk):
    from devices.clients.tiiny import TiinyClient

    body = b"v" * (2 * 1024 * 1024)
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    client = TiinyClient("http://127.0.0.1:9", "key", transport=transport)
    dest = tiny_disk / "video.mp4.download"
    with pytest.raises(OSError) as raised, client:
        client.video_download("v1", dest)
    assert is_disk_full(raised.value)
    assert list(tiny_disk.iterdir()) == []


def test_discard_partials_removes_a_jobs_half_files_only(tmp_path, media_on, member, device):
    from jobs.models import Job

    media_on(tmp_path)
    job = Job.objects.create(owner=member, device=device, kind="video", model_id="m", params={})
    folder = tmp_path / store.job_folder(job)
    folder.mkdir(parents=True)
    for name in ("video.mp4.download", "video.mp4.download.part", ".video.mp4.1.2.part", "stage-1-shape.glb"):
        (folder / name).write_bytes(b"x")
    assert sorted(store.discard_partials(job)) == [
        ".video.mp4.1.2.part",
        "video.mp4.download",
        "video.mp4.download.part",
    ]
    assert [p.name for p in folder.iterdir()] == ["stage-1-shape.glb"]  # a 3D stage kept for the next one


def test_it_tells_a_full_disk_from_other_errors():
    assert is_disk_full(OSError(errno.ENOSPC, "full"))
    assert is_disk_full(OSError(errno.EDQUOT, "quota"))
    try:
        try:
            raise OSError(errno.ENOSPC, "full")
        except OSError as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as wrapped:
        assert is_disk_full(wrapped)
    assert not is_disk_full(OSError(errno.EACCES, "denied"))
    assert not is_disk_full(ValueError("x"))
