"""Free space under the data folder: what admission, the health page, ``/metrics`` and the job engine read.

Results and uploads live under ``MEDIA_ROOT`` (``HUB_DATA_DIR/media``). ``HUB_MIN_FREE_MB`` is the floor below
which the hub takes no new render (0: no floor); a write that finds the disk full anyway (``ENOSPC``, or a quota's
``EDQUOT``) is told apart by :func:`is_disk_full`, so the engine waits for space instead of failing the job.
"""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from hub.media_storage import StoreUnreachable

MB = 1024 * 1024
#: The errors of a write that found no room: the disk is full, or the user's quota on it is.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


@dataclass(frozen=True)
class DiskSpace:
    """Free and total bytes of the filesystem holding ``path``, and the floor (``minimum``, bytes; 0: none)."""

    path: Path
    free: int
    total: int
    minimum: int

    @property
    def low(self) -> bool:
        """Below the floor: new renders are refused."""
        return bool(self.minimum) and self.free < self.minimum

    @property
    def free_text(self) -> str:
        return size_text(self.free)

    @property
    def minimum_text(self) -> str:
        return size_text(self.minimum)


def size_text(n: int) -> str:
    """Bytes in words a person reads at a glance: ``312 MB``, ``4.2 GB``."""
    if n >= 10 * 1024 * MB:
        return f"{n / (1024 * MB):.0f} GB"
    if n >= 1024 * MB:
        return f"{n / (1024 * MB):.1f} GB"
    return f"{n / MB:.0f} MB"


def watched_folder() -> Path:
    """The folder whose disk holds the results: ``MEDIA_ROOT``."""
    return Path(settings.MEDIA_ROOT)


def _existing(path: Path) -> Path:
    """``path``, or its nearest folder that exists (the media folder is made on the first save)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def disk_space(path: Path | None = None) -> DiskSpace:
    """Free space now under ``path`` (default: the results' folder). Raises ``OSError`` if it can't be read."""
    path = Path(path or watched_folder())
    usage = shutil.disk_usage(_existing(path))
    return DiskSpace(path=path, free=usage.free, total=usage.total, minimum=settings.HUB_MIN_FREE_MB * MB)


def low_space() -> DiskSpace | None:
    """The disk space when it is below the floor, else None (no floor, enough room, or unreadable)."""
    if not settings.HUB_MIN_FREE_MB:
        return None
    try:
        space = disk_space()
    except OSError:
        return None
    return space if space.low else None


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a write that found the disk or its quota full."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def is_store_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is the result store (an S3 bucket) failing: the save can be tried again."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, StoreUnreachable):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def is_save_blocked(exc: BaseException) -> bool:
    """A save that found no room, or no store: nothing is lost, the job waits and tries again."""
    return is_disk_full(exc) or is_store_unreachable(exc)


def unwritable_reason(path: Path) -> str | None:
    """Why the hub could not keep files in the folder ``path`` (made if missing), or None when it can."""
    try:
        # 0700: the data folder and its media are the hub's alone (hub.atrest), whatever this process's umask.
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        return f"it cannot be created ({exc.strerror or exc})"
    if not path.is_dir():
        return "it is not a folder"
    probe = path / f".hub-write-check-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        return f"the hub cannot write in it ({exc.strerror or exc})"
    return None


def data_folder_problem() -> str | None:
    """One line naming the data folder the hub cannot use (``HUB_DATA_DIR``, or its ``media`` folder), and why; None
    when both can be written. Start-up stops on it (``hub.checks``, the web server, the worker, beat, ``make up``)."""
    for path, what in (
        (Path(settings.DATA_DIR), "the data folder"),
        (watched_folder(), "the results folder"),
    ):
        if reason := unwritable_reason(path):
            return (
                f"{what} {path} cannot be used: {reason}. Set HUB_DATA_DIR to a folder the hub may write "
                "(it is made if missing), or fix its permissions."
            )
    return None
