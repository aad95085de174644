"""The store (``jobs.files.store``): names, atomic saves, local paths, deletes, on the filesystem storage and on a
storage without ``path()`` (as an object store would be)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from django.core.files.storage import InMemoryStorage, Storage, storages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import RequestFactory

from jobs.files import store
from jobs.files.downloads import artifact_response
from jobs.files.previews import keep_preview, preview_box, preview_version
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db


class NoPathStorage(Storage):
    """A storage with no local files, like an object store: ``path()`` raises NotImplementedError (the base
    class's). The bytes are kept in memory (Django's InMemoryStorage, which needs its own ``path()`` inside)."""

    def __init__(self):
        self.memory = InMemoryStorage()

    def _open(self, name, mode="rb"):
        return self.memory._open(name, mode)

    def _save(self, name, content):
        return self.memory._save(name, content)

    def delete(self, name):
        self.memory.delete(name)

    def exists(self, name):
        return self.memory.exists(name)

    def size(self, name):
        return self.memory.size(name)

    def get_modified_time(self, name):
        return self.memory.get_modified_time(name)


@pytest.fixture
def no_path(settings):
    settings.STORAGES = {**settings.STORAGES, "default": {"BACKEND": f"{__name__}.NoPathStorage"}}
    assert isinstance(storages["default"], NoPathStorage)
    return storages["default"]


@pytest.fixture
def job(member, device):
    return make_job(member, device, state="running")


# -- names ------------------------------------------------------------------------------------------------------
def test_a_jobs_files_are_named_under_its_owner_and_id(job):
    folder = f"results/{job.owner_id}/{job.pk}"
    assert store.job_folder(job) == folder
    assert store.result_name(job, "video.mp4") == f"{folder}/video.mp4"
    assert store.inputs_folder(job) == f"{folder}/inputs"
    assert store.preview_name(job) == f"{folder}/live/preview"


@pytest.mark.parametrize(
    "name, clean",
    [
        ("results/1/2/video.mp4", "results/1/2/video.mp4"),
        ("results/1/2/./inputs/../video.mp4", "results/1/2/video.mp4"),
        ("results/1/../../secret.txt", None),
        ("/etc/passwd", None),
        ("stash/1/abc/image.png", None),
        ("results", None),
        ("", None),
        (None, None),
        ("results/1/\x00.png", None),
    ],
)
def test_clean_name_keeps_only_relative_names_inside_the_results(name, clean):
    assert store.clean_name(name) == clean


def test_an_input_name_comes_from_the_jobs_params_and_stays_inside_the_results(job):
    job.params = {
        **job.params,
        "files": {"image": "results/9/9/inputs/image.png", "end_image": "/etc/passwd"},
    }
    assert (
        store.input_name(job, "image") == "results/9/9/inputs/image.png"
    )  # a run-again job reads the first's
    assert store.input_name(job, "end_image") is None
    assert store.input_name(job, "ref_audio") is None


# -- the filesystem storage --------------------------------------------------------------------------------------
def test_save_replaces_the_file_atomically_and_leaves_no_part_file(job, media):
    name = store.result_name(job, "image.png")
    store.save_bytes(name, b"old picture")
    path = Path(media) / name

    def chunks():
        yield b"new "
        assert path.read_bytes() == b"old picture"  # a reader still sees the whole old file mid-write
        yield b"picture"

    store.save_chunks(name, chunks())
    assert path.read_bytes() == b"new picture"
    assert sorted(p.name for p in path.parent.iterdir()) == ["image.png"]


def test_a_save_that_fails_midway_keeps_the_old_file(job, media):
    name = store.result_name(job, "image.png")
    store.save_bytes(name, b"old picture")

    def broken():
        yield b"half a pict"
        raise OSError(errno.ENOSPC, "disk full")

    with pytest.raises(OSError):
        store.save_chunks(name, broken())
    path = Path(media) / name
    assert path.read_bytes() == b"old picture"
    assert sorted(p.name for p in path.parent.iterdir()) == ["image.png"]


def test_adopt_moves_a_download_in_by_renaming_it(job, media):
    work = store.work_path(job, "video.mp4.download")
    assert work == Path(media) / store.result_name(job, "video.mp4.download")  # same folder: a rename
    work.write_bytes(b"mp4 bytes")
    store.adopt(store.result_name(job, "video.mp4"), work)
    assert not work.exists()
    assert (Path(media) / store.result_name(job, "video.mp4")).read_bytes() == b"mp4 bytes"


def test_adopt_copies_atomically_across_disks(job, media, tmp_path, monkeypatch):
    src = tmp_path / "elsewhere.download"
    src.write_bytes(b"from another disk")
    real_replace = os.replace

    def replace(a, b):
        if Path(a) == src:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real_replace(a, b)

    monkeypatch.setattr(os, "replace", replace)
    store.adopt(store.result_name(job, "audio.wav"), src)
    assert not src.exists()
    assert (Path(media) / store.result_name(job, "audio.wav")).read_bytes() == b"from another disk"


def test_save_artifact_records_the_stored_name_size_and_digest(job, media):
    art = store.save_artifact(job, kind="image", name="image.png", data=b"png-bytes")
    again = store.save_artifact(job, kind="image", name="image.png", data=b"png-bytes, again")
    assert job.artifacts.count() == 1 and again.file.name == store.result_name(job, "image.png")
    assert again.bytes == len(b"png-bytes, again") and len(again.sha256) == 64 and again.mime == "image/png"
    assert art.sha256 != again.sha256


def test_find_refuses_a_symlink_out_of_the_folder(job, media):
    inside = Path(media) / store.inputs_folder(job)
    inside.mkdir(parents=True)
    secret = Path(media) / "secret.txt"
    secret.write_text("not yours")
    (inside / "link.png").symlink_to(secret)
    (inside / "image.png").write_bytes(b"png")
    assert store.find(f"{store.inputs_folder(job)}/link.png") is None
    found = store.find(f"{store.inputs_folder(job)}/image.png", within=store.inputs_folder(job))
    assert found is not None and found.size == 3 and found.path == (inside / "image.png").resolve()
    assert store.find(f"{store.inputs_folder(job)}/image.png", within=f"{store.job_folder(job)}/live") is None
    assert store.find("results/../secret.txt") is None and store.find("/etc/passwd") is None


def test_local_path_on_the_filesystem_is_the_file_itself(job, media):
    name = store.save_bytes(store.result_name(job, "loop.wav"), b"RIFF")
    with store.local_path(name) as path:
        assert path == Path(media) / name and path.read_bytes() == b"RIFF"
    assert (Path(media) / name).exists()
    with pytest.raises(FileNotFoundError), store.local_path("stash/1/x.png"):
        pass


def test_delete_removes_the_files_and_a_missing_one_is_no_error(job, media):
    a = store.save_bytes(store.result_name(job, "a.png"), b"a")
    b = store.save_bytes(store.result_name(job, "b.png"), b"b")
    store.delete([a, store.result_name(job, "never.png")])
    assert not store.exists(a) and store.exists(b)


def test_save_input_names_the_file_by_its_checked_type(job, media):
    upload = SimpleUploadedFile("holiday.jpeg", b"jpeg bytes", "image/jpeg")
    name = store.save_input(job, "start_image", upload)
    assert name == f"{store.inputs_folder(job)}/start_image.jpg"
    job.params = {**job.params, "files": {"start_image": name}}
    assert store.input_bytes(job, "start_image") == (b"jpeg bytes", "start_image.jpg", "image/jpeg")
    assert store.data_uri(job, "start_image").startswith("data:image/jpeg;base64,")
    assert store.input_bytes(job, "end_image") is None


# -- a storage without path() ------------------------------------------------------------------------------------
def test_without_path_saves_reads_and_deletes_go_through_the_storage(no_path, job, media):
    art = store.save_artifact(job, kind="image", name="image.png", data=b"png-bytes")
    assert no_path.exists(art.file.name) and not (Path(media) / art.file.name).exists()
    assert store.read_bytes(art.file.name) == b"png-bytes" and art.bytes == 9
    store.save_bytes(art.file.name, b"replaced")
    assert store.read_bytes(art.file.name) == b"replaced"  # the same name, not image_abc123.png
    found = store.find(art.file.name)
    assert found is not None and found.path is None and found.size == 8 and found.mtime_ns > 0
    store.delete([art.file.name])
    assert not no_path.exists(art.file.name) and store.find(art.file.name) is None


def test_without_path_local_path_is_a_temporary_copy_removed_afterwards(no_path, job):
    name = store.save_bytes(store.result_name(job, "video.mp4"), b"mp4 bytes")
    with store.local_path(name) as path:
        assert path.suffix == ".mp4" and path.read_bytes() == b"mp4 bytes"
        kept = path
    assert not kept.exists()


def test_without_path_downloads_are_adopted_from_a_local_work_folder(no_path, job):
    work = store.work_path(job, "video.mp4.download")
    assert work.parent.is_dir() and store.WORK_DIR in work.parts
    work.write_bytes(b"downloaded")
    art = store.save_artifact(job, kind="video", name="video.mp4", path=work, mime="video/mp4")
    assert not work.exists() and store.read_bytes(art.file.name) == b"downloaded"


def test_without_path_results_are_served_with_ranges_and_previews_kept(no_path, job, member, settings):
    art = store.save_artifact(job, kind="video", name="video.mp4", data=bytes(range(100)), mime="video/mp4")
    request = RequestFactory().get("/", headers={"Range": "bytes=10-19"})
    request.user = member
    response = artifact_response(request, art)
    assert response.status_code == 206 and b"".join(response.streaming_content) == bytes(range(10, 20))
    assert response["Content-Range"] == "bytes 10-19/100"
    settings.JOBS_SENDFILE = "x-sendfile"  # no local file to hand over: Django streams it
    request = RequestFactory().get("/")
    request.user = member
    full = artifact_response(request, art)
    assert full.status_code == 200 and "X-Sendfile" not in full
    assert b"".join(full.streaming_content) == bytes(range(100))
    keep_preview(job, b"\x89PNG\r\n\x1a\npreview")
    assert preview_version(job) != ""


# -- the preview box: the caller looks the runner style up ---------------------------------------------------------
def test_the_preview_box_asks_the_callers_style_lookup(job, media):
    def stream(device_kind, kind):
        return "stream"

    def unknown(device_kind, kind):
        raise ValueError("A Tiiny cannot run that.")

    assert preview_box(job, style_of=stream) == {"show": True, "active": True, "version": ""}
    keep_preview(job, b"\x89PNG\r\n\x1a\npreview")
    assert preview_box(job, style_of=stream)["version"] == preview_version(job) != ""
    assert preview_box(job, style_of=lambda d, k: "poll")["show"] is False
    assert preview_box(job, style_of=unknown) == {"show": False, "active": True, "version": ""}
