"""Moving every stored file to another store (``manage.py media_move --to s3://...``).

Each file of the current store (results, inputs, thumbnails, previews, kept uploads) is copied to the new one and
checked there: its sha256 read back from the new store must be the source's, and the source's must be the one its
``Artifact`` row recorded when the result was saved (a result changed or damaged on disk is reported, not copied).
A file the new store already holds with the same size and sha256 is skipped, so a move that was interrupted (the
network dropped, the command was stopped) simply runs again and goes on where it stopped.

Copying does not switch the hub: the running processes keep the store their environment names until they are
started again with the new ``HUB_MEDIA_STORAGE`` (the command prints the line to set). Files written between the
copy and the switch are copied by running the command once more just before it. The old files stay where they are
until ``--delete-source``, which removes only files whose copy is verified.
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.core.files import File
from django.core.files.storage import Storage

from jobs.files.store import CHUNK, unreachable_as_oserror
from jobs.models import Artifact

#: Files never moved: a save or a download cut short (their job makes them again).
SKIP_SUFFIXES = (".part", ".download")


@dataclass
class MoveReport:
    copied: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    bytes_copied: int = 0

    @property
    def ok(self) -> bool:
        return not self.failed


def walk(source: Storage, folder: str = "") -> Iterator[str]:
    """Every file's name in ``source`` below ``folder``, folders first-to-last in name order."""
    try:
        dirs, files = source.listdir(folder)
    except FileNotFoundError:
        return
    for name in sorted(files):
        if not name.startswith(".") and not name.endswith(SKIP_SUFFIXES):
            yield posixpath.join(folder, name) if folder else name
    for sub in sorted(dirs):
        if not sub.startswith("."):
            yield from walk(source, posixpath.join(folder, sub) if folder else sub)


def digest(storage: Storage, name: str) -> tuple[str, int] | None:
    """(sha256, size) of ``name`` in ``storage``, or None when it has no such file."""
    with unreachable_as_oserror():
        if not storage.exists(name):
            return None
        h, size = hashlib.sha256(), 0
        with storage.open(name, "rb") as fh:
            for chunk in iter(lambda: fh.read(CHUNK), b""):
                h.update(chunk)
                size += len(chunk)
    return h.hexdigest(), size


def recorded_digests() -> dict[str, str]:
    """The sha256 each result's row recorded when it was saved (rows with a placeholder digest left out)."""
    rows = Artifact.objects.values_list("file", "sha256")
    return {str(name): sha for name, sha in rows if sha and sha.strip("0")}


def move(
    source: Storage,
    target: Storage,
    *,
    delete_source: bool = False,
    said: Callable[[str, str], Any] = lambda name, what: None,
) -> MoveReport:
    """Copy every file of ``source`` to ``target`` and check it (see the module's docstring); ``said(name, what)``
    hears of each file (``copied``, ``already there``, ``failed: ...``, ``deleted``)."""
    report, recorded = MoveReport(), recorded_digests()
    for name in walk(source):
        try:
            outcome = _move_one(source, target, name, recorded.get(name))
        except OSError as exc:
            report.failed[name] = str(exc)
            said(name, f"failed: {exc}")
            continue
        if outcome is None:
            report.already.append(name)
            said(name, "already there")
        else:
            report.copied.append(name)
            report.bytes_copied += outcome
            said(name, "copied")
    if delete_source and report.ok:
        for name in [*report.already, *report.copied]:
            source.delete(name)
            report.deleted.append(name)
            said(name, "deleted")
    return report


def _move_one(source: Storage, target: Storage, name: str, recorded: str | None) -> int | None:
    """Copy ``name`` unless ``target`` has it already, verified; its size when copied, None when it was there."""
    src = digest(source, name)
    if src is None:
        raise OSError(f"{name} vanished from the source while moving")
    if recorded is not None and src[0] != recorded:
        raise OSError(
            f"{name} is not the file its job saved (sha256 {src[0][:12]}..., recorded {recorded[:12]}...)"
        )
    if digest(target, name) == src:
        return None
    with unreachable_as_oserror(), source.open(name, "rb") as fh:
        saved = target.save(name, File(fh, name=posixpath.basename(name)))
    if saved != name:
        raise OSError(f"the new store saved {name} as {saved} (it must replace files in place)")
    if digest(target, name) != src:
        raise OSError(f"{name}: the copy in the new store does not match (sha256 or size)")
    return src[1]
