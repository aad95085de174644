"""One home for a job's files: its results, its inputs, its live preview and its thumbnail.

Every file of a job lives in one folder of the default storage (``STORAGES["default"]``, a FileSystemStorage on
MEDIA_ROOT today), ``results/<owner>/<job>/``:

- results and the thumbnail at its top, each recorded as an ``Artifact`` whose ``file`` is the stored name;
- the inputs in ``inputs/`` (``<name>.<ext>``), ``job.params["files"]`` mapping each input's name to its stored name;
- the live preview at ``live/preview``;
- a runner's work files (downloads before they become a result, 3D stages) beside the results.

Names are relative POSIX paths, as ``Artifact.file`` keeps them. Everything that writes or reads these files goes
through this module and Django's storage API, so another storage (an object store) is a settings change. Tools that
need a real file (ffmpeg, X-Sendfile) ask :func:`local_path`: the file itself on the filesystem, a temporary copy
from a storage without ``path()``.

Saves are atomic: a reader sees the old file or the new one, never half of one (a temporary file beside the target,
then a rename; a storage without ``path()`` is sent the whole file in one save: an S3 object appears whole when its
upload completes, or not at all).

On an S3 bucket (``HUB_MEDIA_STORAGE=s3://...``, django-storages' S3Storage) :func:`find` is one HEAD request and
:func:`open_range` one ranged GET (S3Storage's own ``open()`` downloads the whole object first, which a video seek
must not do). A store that can't be reached raises :class:`StoreUnreachable` (an ``OSError``) wherever it is met,
so a saving worker waits and retries (``jobs.queue``) and a download answers 503, never a half-written file.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import logging
import mimetypes
import os
import posixpath
import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from django.core.exceptions import SuspiciousFileOperation
from django.core.files import File
from django.core.files.storage import Storage, default_storage
from django.db import transaction

from hub.media_storage import UNREACHABLE, StoreUnreachable
from jobs.files.story import tell
from jobs.models import Artifact, Job

logger = logging.getLogger("jobs.files.store")

#: The folder of every job's files, in the default storage.
RESULTS = "results"
CHUNK = 1024 * 1024
#: Where a storage without ``path()`` gets its work files (downloads before they are saved).
WORK_DIR = "hub-work"


def storage() -> Storage:
    """The default storage (``STORAGES["default"]``); looked up on every call, so tests can swap it."""
    return default_storage


# -- a remote store (an S3 bucket) ---------------------------------------------------------------------------
def is_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` is the store failing (network, timeout, a 5xx or a refusal), not a missing file or a bug."""
    if isinstance(exc, StoreUnreachable):
        return True
    try:
        from boto3.exceptions import Boto3Error
        from botocore import exceptions as bx
    except ImportError:  # a hub without django-storages' S3 extra: only the filesystem
        return False
    if isinstance(exc, bx.ClientError):
        return exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") != 404
    return isinstance(exc, (bx.BotoCoreError, Boto3Error)) and not isinstance(exc, bx.ParamValidationError)


@contextmanager
def unreachable_as_oserror() -> Iterator[None]:
    """Turn the store's own failures (botocore's) into :class:`StoreUnreachable`, one error callers know."""
    try:
        yield
    except StoreUnreachable:
        raise
    except Exception as exc:
        if not is_unreachable(exc):
            raise
        raise StoreUnreachable(errno.EIO, f"{UNREACHABLE} ({type(exc).__name__}: {exc})") from exc


def _s3(target: Storage) -> Any | None:
    """The boto3 client of django-storages' S3Storage (None for any other storage)."""
    if not all(hasattr(target, attr) for attr in ("bucket_name", "connection", "_normalize_name")):
        return None
    return target.connection.meta.client


def _s3_head(client: Any, target: Any, name: str) -> Stored | None:
    try:
        head = client.head_object(Bucket=target.bucket_name, Key=target._normalize_name(name))
    except Exception as exc:
        if getattr(exc, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
            return None
        raise
    modified = round(head["LastModified"].timestamp() * 1_000_000) * 1000
    return Stored(name, int(head["ContentLength"]), modified, etag=str(head.get("ETag", "")))


def _s3_range(client: Any, target: Any, name: str, start: int, length: int) -> BinaryIO:
    got = client.get_object(
        Bucket=target.bucket_name,
        Key=target._normalize_name(name),
        Range=f"bytes={start}-{start + length - 1}",
    )
    return got["Body"]  # a stream of just those bytes: read(n), close()


def remote() -> bool:
    """Whether the store has no local files (an object store)."""
    return _fs_path("") is None


def _fs_path(name: str) -> Path | None:
    """The file's path on the filesystem storage; None for a storage without ``path()``."""
    try:
        return Path(storage().path(name))
    except NotImplementedError:
        return None


# -- names ---------------------------------------------------------------------------------------------------
def job_folder(job: Job) -> str:
    return f"{RESULTS}/{job.owner_id}/{job.pk}"


def result_name(job: Job, name: str) -> str:
    return f"{job_folder(job)}/{name}"


def inputs_folder(job: Job) -> str:
    return f"{job_folder(job)}/inputs"


def preview_name(job: Job) -> str:
    return f"{job_folder(job)}/live/preview"


def clean_name(name: Any, *, within: str = RESULTS) -> str | None:
    """``name`` normalised, if it is a relative name inside the folder ``within``; None for anything else."""
    if not isinstance(name, str) or not name or name.startswith("/") or "\x00" in name:
        return None
    norm = posixpath.normpath(name)
    return norm if norm.startswith(within.rstrip("/") + "/") else None


def input_name(job: Job, name: str) -> str | None:
    """The stored name of the job's input ``name`` (``job.params["files"]``), if it lies inside the results.

    A job run again keeps the first job's inputs, so this is not limited to the job's own folder (the job page is:
    ``find(..., within=inputs_folder(job))``)."""
    files = job.params.get("files") if isinstance(job.params, dict) else None
    return clean_name((files or {}).get(name))


# -- finding and reading -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stored:
    """A stored file that exists: its name (symlinks resolved on the filesystem), size and modification time."""

    name: str
    size: int
    mtime_ns: int
    path: Path | None = None  # the local file, on the filesystem storage
    etag: str = (
        ""  # the object's ETag, on an S3 bucket (it changes with the content, within the same second too)
    )


def find(name: Any, *, within: str = RESULTS) -> Stored | None:
    """The file called ``name``, if it exists and lies inside the folder ``within`` (on the filesystem: after
    resolving ``..`` and symlinks, so a link out of the folder is refused); None otherwise."""
    if _fs_path("") is None:
        return _find_elsewhere(name, within)
    path = local_file(name, within=within)
    try:
        if path is None or not path.is_file():
            return None
        st = path.stat()
    except OSError:
        return None
    return Stored(path.relative_to(_resolved("")).as_posix(), st.st_size, st.st_mtime_ns, path)


def local_file(name: Any, *, within: str = RESULTS) -> Path | None:
    """On the filesystem storage, the file's path with ``..`` and symlinks resolved, if that lies inside the folder
    ``within`` (whether the file exists or not); None for anything outside, or a storage without ``path()``."""
    if not isinstance(name, str) or not name or _fs_path("") is None:
        return None
    try:
        root = _resolved(within)
        path = _resolved(name)
    except (SuspiciousFileOperation, OSError, RuntimeError, ValueError):
        return None
    return path if root in path.parents else None


def _resolved(name: str) -> Path:
    return Path(storage().path(name)).resolve()


def _find_elsewhere(name: str, within: str) -> Stored | None:
    clean = clean_name(name, within=within)
    if clean is None:
        return None
    target = storage()
    with unreachable_as_oserror():
        if (s3 := _s3(target)) is not None:
            return _s3_head(s3, target, clean)
        if not target.exists(clean):
            return None
        modified = target.get_modified_time(clean)
        return Stored(clean, target.size(clean), round(modified.timestamp() * 1_000_000) * 1000)


def stat(name: str) -> Stored:
    """The stored file ``name`` wherever it lies in the store (a backup reads every file); FileNotFoundError when
    there is none."""
    top = name.split("/", 1)[0]
    found = find(name, within=top) if clean_name(name, within=top) == name else None
    if found is None:
        raise FileNotFoundError(errno.ENOENT, "no such stored file", name)
    return found


def open_stored(stored: Stored) -> BinaryIO:
    """The file opened for reading (the caller closes it); seekable."""
    if stored.path is not None:
        return open(stored.path, "rb")
    with unreachable_as_oserror():
        return storage().open(stored.name, "rb")


def open_range(stored: Stored, start: int, length: int) -> BinaryIO:
    """The file opened for reading ``length`` bytes from ``start`` (the caller closes it): a seek on the filesystem,
    one ranged GET on an S3 bucket (only those bytes cross the network)."""
    target = storage()
    if stored.path is None and length > 0 and (s3 := _s3(target)) is not None:
        with unreachable_as_oserror():
            return _s3_range(s3, target, stored.name, start, length)
    handle = open_stored(stored)
    handle.seek(start)
    return handle


def exists(name: str) -> bool:
    with unreachable_as_oserror():
        return storage().exists(name)


def read_bytes(name: str) -> bytes:
    with unreachable_as_oserror(), storage().open(name, "rb") as fh:
        return fh.read()


@contextmanager
def local_path(name: str) -> Iterator[Path]:
    """A real file with the stored file's bytes, for tools that need one (ffmpeg, Pillow): the file itself on
    the filesystem storage, else a temporary copy removed afterwards. Refuses names outside the results."""
    if clean_name(name) is None:
        raise FileNotFoundError(errno.ENOENT, "not a stored file", name)
    direct = _fs_path(name)
    if direct is not None:
        yield direct
        return
    fd, tmp = tempfile.mkstemp(prefix="hub-", suffix=PurePosixPath(name).suffix)
    try:
        with unreachable_as_oserror(), os.fdopen(fd, "wb") as out, storage().open(name, "rb") as src:
            shutil.copyfileobj(src, out, CHUNK)
        yield Path(tmp)
    finally:
        os.unlink(tmp)


# -- writing -------------------------------------------------------------------------------------------------
def save_bytes(name: str, data: bytes) -> str:
    """Store ``data`` as ``name``, replacing what was there (atomic). Returns the name."""
    return save_chunks(name, (data,))


def save_chunks(name: str, chunks: Iterable[bytes]) -> str:
    """Store the bytes of ``chunks`` as ``name``, replacing what was there (atomic). Returns the name."""
    dest = _fs_path(name)
    if dest is None:
        with tempfile.TemporaryFile() as spool:
            for chunk in chunks:
                spool.write(chunk)
            spool.seek(0)
            return _save_elsewhere(name, spool)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        with open(tmp, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return name


def adopt(name: str, path: Path) -> str:
    """Move the local file ``path`` (a finished download) into the store as ``name`` (atomic). Returns the name."""
    dest = _fs_path(name)
    if dest is not None and Path(path) == dest:
        return name
    if dest is not None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(path, dest)  # same disk (work_path): a rename
            return name
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
    with open(path, "rb") as fh:
        save_chunks(name, iter(lambda: fh.read(CHUNK), b""))
    os.unlink(path)
    return name


def _save_elsewhere(name: str, handle: Any) -> str:
    """A storage without ``path()`` (an object store) takes the whole file in one save."""
    target = storage()
    with unreachable_as_oserror():
        if not getattr(target, "file_overwrite", False) and target.exists(name):
            target.delete(name)  # a storage that would pick another name; S3 replaces an object in one PUT
        saved = target.save(name, File(handle, name=PurePosixPath(name).name))
    if saved != name:
        raise OSError(f"the storage saved {name} as {saved}")
    return name


def work_path(job: Job, name: str) -> Path:
    """A local file for a runner to download into before :func:`adopt` makes it a result (or to keep a 3D stage
    for the next one): in the job's folder on the filesystem storage (adopting is then a rename), else in a
    temporary folder of this machine."""
    path = _fs_path(result_name(job, name))
    if path is None:
        path = Path(tempfile.gettempdir()) / WORK_DIR / str(job.owner_id) / str(job.pk) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def keep_work(job: Job, name: str) -> None:
    """Store the work file ``name`` (a 3D stage's mesh) in the job's folder, so a worker on another machine that
    takes the job over finds it (:func:`fetch_work`). On the filesystem storage the work file already is there."""
    path = work_path(job, name)
    if _fs_path(result_name(job, name)) != path:
        with open(path, "rb") as fh:
            save_chunks(result_name(job, name), iter(lambda: fh.read(CHUNK), b""))


def fetch_work(job: Job, name: str) -> Path:
    """The local work file ``name``, fetched from the store when this machine has none (kept by :func:`keep_work`
    on another worker, or before a restart emptied the temporary folder)."""
    path = work_path(job, name)
    if not path.exists() and _fs_path(result_name(job, name)) != path:
        part = path.with_name(f".{path.name}.{os.getpid()}.part")
        try:
            with (
                unreachable_as_oserror(),
                open(part, "wb") as out,
                storage().open(result_name(job, name)) as src,
            ):
                shutil.copyfileobj(src, out, CHUNK)
            os.replace(part, path)
        finally:
            part.unlink(missing_ok=True)
    return path


def discard_partials(job: Job) -> list[str]:
    """Remove the job's half-written files: a download or a save cut short (``*.part``) and downloads not yet made
    results (``*.download``, fetched again on the next try). For a save that found the disk full: what it wrote
    is given back. Returns the names of the files removed."""
    folder = _fs_path(job_folder(job))
    if folder is None:
        folder = Path(tempfile.gettempdir()) / WORK_DIR / str(job.owner_id) / str(job.pk)
    removed = []
    for pattern in ("*.part", "*.download"):
        for path in folder.glob(pattern):
            try:
                path.unlink()
            except OSError:
                logger.warning("could not remove %s", path, exc_info=True)
                continue
            removed.append(path.name)
    return removed


def files_in(folder: str) -> list[str]:
    """The names of the files directly in ``folder`` (none when it doesn't exist)."""
    with unreachable_as_oserror():
        try:
            return sorted(storage().listdir(folder)[1])
        except FileNotFoundError:
            return []


def subfolders(folder: str, *, depth: int = 1) -> list[str]:
    """The folders ``depth`` levels below ``folder`` (``a/b`` for depth 2), by their full names."""
    found = [folder.rstrip("/")]
    for _ in range(depth):
        below = []
        for parent in found:
            with unreachable_as_oserror():
                try:
                    below += [f"{parent}/{d}" for d in sorted(storage().listdir(parent)[0])]
                except FileNotFoundError:
                    continue
        found = below
    return found


def delete(names: Iterable[str]) -> None:
    """Remove these files (a missing one is no error; one that can't be removed is logged and left)."""
    target = storage()
    for name in names:
        try:
            with unreachable_as_oserror():
                target.delete(name)
        except OSError:
            logger.warning("could not remove %s", name, exc_info=True)


# -- results ---------------------------------------------------------------------------------------------------
def digest_of(name: str) -> tuple[str, int]:
    """(sha256 hex, size) of a stored file, read in chunks."""
    h = hashlib.sha256()
    size = 0
    with unreachable_as_oserror(), storage().open(name, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _local_digest(data: bytes | None, path: Path | None) -> tuple[str, int]:
    if data is not None:
        return hashlib.sha256(data).hexdigest(), len(data)
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as fh:  # type: ignore[arg-type]
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def save_artifact(
    job: Job,
    *,
    kind: str,
    name: str,
    data: bytes | None = None,
    path: Path | None = None,
    mime: str | None = None,
) -> Artifact:
    """Store a result (``data``, or the local file ``path`` moved in) in the job's folder, checksum it, and record
    it. Idempotent by name, so a collect step that runs twice (after a crash) leaves one row per file.

    The result first gets its story written in (``jobs.files.story.tell``: how it was made, in its format's own
    metadata); the checksum and size are those of the bytes stored. A story that can't be written costs nothing:
    the result is stored as it came."""
    stored = result_name(job, name)
    data, path = tell(job, kind=kind, name=name, data=data, path=path)
    if remote() and (data is not None or path is not None):
        # Checksummed here, before it leaves (reading it back from the bucket would fetch it again); the bucket's
        # size of it is checked after the upload.
        digest, size = _local_digest(data, path)
        save_bytes(stored, data) if data is not None else adopt(stored, Path(path))  # type: ignore[arg-type]
        found = find(stored)
        if found is None or found.size != size:
            raise StoreUnreachable(errno.EIO, f"{UNREACHABLE}: {stored} was not stored whole")
    else:
        if data is not None:
            save_bytes(stored, data)
        elif path is not None:
            adopt(stored, Path(path))
        digest, size = digest_of(stored)
    mime = mime or mimetypes.guess_type(name)[0] or "application/octet-stream"
    with transaction.atomic():
        Artifact.objects.filter(job=job, name=name).delete()
        artifact = Artifact.objects.create(
            job=job, kind=kind, file=stored, name=name, mime=mime, bytes=size, sha256=digest
        )
    return artifact


# -- inputs ----------------------------------------------------------------------------------------------------
def save_input(job: Job, name: str, upload: Any) -> str:
    """Store an uploaded input as ``inputs/<name>.<ext>`` (the extension from its checked type); its stored name."""
    mime = getattr(upload, "sniffed_mime", None) or getattr(upload, "content_type", "") or ""
    ext = mimetypes.guess_extension(mime) or Path(getattr(upload, "name", "") or "").suffix or ".bin"
    ext = {".jpe": ".jpg", ".jpeg": ".jpg"}.get(ext, ext)
    if hasattr(upload, "chunks"):
        chunks: Iterable[bytes] = upload.chunks()
    else:
        chunks = (upload.read() if hasattr(upload, "read") else bytes(upload),)
    return save_chunks(f"{inputs_folder(job)}/{name}{ext}", chunks)


def input_bytes(job: Job, name: str) -> tuple[bytes, str, str] | None:
    """(data, file name, mime) of an uploaded input, or None."""
    stored = input_name(job, name)
    if stored is None or not exists(stored):
        return None
    filename = PurePosixPath(stored).name
    mime = mimetypes.guess_type(filename)[0] or "application/octet-stream"
    return read_bytes(stored), filename, mime


def data_uri(job: Job, name: str) -> str | None:
    got = input_bytes(job, name)
    if got is None:
        return None
    data, _name, mime = got
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


__all__ = [
    "RESULTS",
    "UNREACHABLE",
    "StoreUnreachable",
    "Stored",
    "adopt",
    "clean_name",
    "data_uri",
    "delete",
    "digest_of",
    "discard_partials",
    "exists",
    "fetch_work",
    "files_in",
    "find",
    "input_bytes",
    "input_name",
    "is_unreachable",
    "inputs_folder",
    "job_folder",
    "keep_work",
    "local_file",
    "local_path",
    "open_range",
    "open_stored",
    "preview_name",
    "read_bytes",
    "remote",
    "result_name",
    "save_artifact",
    "save_bytes",
    "save_chunks",
    "save_input",
    "stat",
    "storage",
    "subfolders",
    "unreachable_as_oserror",
    "work_path",
]
