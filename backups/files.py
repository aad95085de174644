"""The files half of a backup: every file of the default storage (results, inputs, thumbnails), copied into the
backup's ``files/`` folder, or hard-linked from the previous backup when unchanged; and put back on restore.

Incremental: a file whose size and modification time match the previous backup's manifest entry keeps the sha256
recorded there (saves are atomic renames, so a changed file always has a new modification time) and is hard-linked
from the previous backup, when that copy is still there with that size; across filesystems (EXDEV) or where links
are refused, it is copied. Everything else is copied, hashed as it is read.

Files are read through Django's default storage (``jobs.files.store.storage``). With an S3 bucket as the store
(``HUB_MEDIA_STORAGE=s3://...``) the backup holds the bucket's objects too: each is downloaded into the backup
(streamed, never whole in memory), and an object whose size, modification time and ETag match the previous backup's
entry is hard-linked from it instead, as on the disk. The manifest's ``store`` says which store the files came from.
"""

from __future__ import annotations

import errno
import hashlib
import os
import posixpath
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from jobs.files import store
from jobs.files.store import CHUNK, save_chunks, storage

FILES_DIR = "files"

Progress = Callable[["FileTally"], None]


@dataclass
class FileTally:
    """What the files step did so far (read by the console progress and recorded on the run)."""

    total: int = 0
    total_bytes: int = 0
    done: int = 0
    done_bytes: int = 0
    copied: int = 0
    copied_bytes: int = 0
    linked: int = 0
    vanished: int = 0  # listed, then deleted before it was read (a job deleted meanwhile)
    entries: list[dict] = field(default_factory=list)


def _is_partial(name: str) -> bool:
    """A save still being written by ``jobs.files.store`` (``.<name>.<pid>.<thread>.part``)."""
    base = posixpath.basename(name)
    return base.startswith(".") and base.endswith(".part")


def stored_names(folder: str = "") -> Iterator[str]:
    """Every file of the default storage under ``folder``, as storage names (sorted, partial saves left out)."""
    target = storage()
    try:
        dirs, files = target.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return
    for name in sorted(files):
        full = posixpath.join(folder, name) if folder else name
        if not _is_partial(full):
            yield full
    for name in sorted(dirs):
        yield from stored_names(posixpath.join(folder, name) if folder else name)


def _local(name: str) -> Path | None:
    try:
        return Path(storage().path(name))
    except NotImplementedError:
        return None


def _stat(name: str) -> tuple[int, int, str]:
    """(size, mtime_ns, etag): the local file's, or the bucket object's (its ETag changes with its content)."""
    path = _local(name)
    if path is None:
        found = store.stat(name)
        return found.size, found.mtime_ns, found.etag
    st = path.stat()
    return st.st_size, st.st_mtime_ns, ""


def _open(name: str, size: int, mtime_ns: int):
    if _local(name) is None:  # an object store: one streamed GET, not a whole-object temporary copy
        return (
            store.open_range(store.Stored(name, size, mtime_ns), 0, size)
            if size
            else storage().open(name, "rb")
        )
    return storage().open(name, "rb")


def _copy_hashing(name: str, dest: Path, size_now: int = 0, mtime_ns: int = 0) -> tuple[int, str]:
    h = hashlib.sha256()
    size = 0
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _open(name, size_now, mtime_ns) as src, open(dest, "wb") as out:
        for chunk in iter(lambda: src.read(CHUNK), b""):
            h.update(chunk)
            out.write(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def _link(previous: Path, dest: Path) -> bool:
    """Hard-link ``previous`` as ``dest``; False when links can't be made here (another filesystem, refused)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(previous, dest)
    except OSError as exc:
        if exc.errno in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EACCES):
            return False
        raise
    return True


def _reusable(
    entry: dict | None, size: int, mtime_ns: int, previous_root: Path | None, etag: str = ""
) -> Path | None:
    """The previous backup's copy of this file when the file is unchanged since (same size, mtime and ETag)."""
    if entry is None or previous_root is None or not mtime_ns:
        return None
    if entry.get("size") != size or entry.get("mtime_ns") != mtime_ns or entry.get("etag", "") != etag:
        return None
    candidate = previous_root / FILES_DIR / entry["name"]
    try:
        return candidate if candidate.stat().st_size == size else None
    except OSError:
        return None


def back_up_files(
    dest_root: Path,
    *,
    previous_root: Path | None,
    previous_files: dict[str, dict],
    progress: Progress | None = None,
) -> FileTally:
    """Copy (or link) every stored file into ``dest_root/files``; returns the tally with one entry per file."""
    names = list(stored_names())
    tally = FileTally(total=len(names))
    sizes = {}
    for name in names:
        try:
            sizes[name] = _stat(name)
        except FileNotFoundError:
            tally.vanished += 1
    tally.total_bytes = sum(size for size, _mtime, _etag in sizes.values())
    tally.total = len(sizes)
    for name, (size, mtime_ns, etag) in sizes.items():
        dest = dest_root / FILES_DIR / name
        old = previous_files.get(name)
        reuse = _reusable(old, size, mtime_ns, previous_root, etag)
        if reuse is not None and _link(reuse, dest):
            digest = old["sha256"]
            tally.linked += 1
        else:
            try:
                size, digest = _copy_hashing(name, dest, size, mtime_ns)
            except FileNotFoundError:
                tally.vanished += 1
                tally.total -= 1
                continue
            tally.copied += 1
            tally.copied_bytes += size
        entry = {"name": name, "size": size, "sha256": digest, "mtime_ns": mtime_ns}
        tally.entries.append({**entry, "etag": etag} if etag else entry)
        tally.done += 1
        tally.done_bytes += size
        if progress is not None:
            progress(tally)
    return tally


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def restore_files(backup_root: Path, entries: list[dict], progress: Progress | None = None) -> FileTally:
    """Put every listed file back into the default storage (atomic saves), checking each one's sha256 as it is
    read; a mismatch raises ``ValueError`` naming the file."""
    tally = FileTally(total=len(entries), total_bytes=sum(e["size"] for e in entries))
    for entry in entries:
        src = backup_root / FILES_DIR / entry["name"]
        h = hashlib.sha256()

        def chunks(src=src, h=h) -> Iterator[bytes]:
            with open(src, "rb") as fh:
                for chunk in iter(lambda: fh.read(CHUNK), b""):
                    h.update(chunk)
                    yield chunk

        save_chunks(entry["name"], chunks())
        if h.hexdigest() != entry["sha256"]:
            storage().delete(entry["name"])
            raise ValueError(f"{entry['name']}: sha256 differs from the manifest")
        tally.done += 1
        tally.done_bytes += entry["size"]
        tally.copied += 1
        if progress is not None:
            progress(tally)
    return tally


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


class Throttle:
    """Call ``report`` at most every ``every_s`` seconds, and always for the last item."""

    def __init__(self, report: Callable[[FileTally], None], every_s: float = 2.0) -> None:
        self.report, self.every_s, self._last = report, every_s, 0.0

    def __call__(self, tally: FileTally) -> None:
        now = time.monotonic()
        if tally.done >= tally.total or now - self._last >= self.every_s:
            self._last = now
            self.report(tally)
