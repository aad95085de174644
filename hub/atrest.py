"""Files at rest are the hub's alone: the data folder and what is in it open to its owner only.

The database holds session keys, the logs hold addresses and the media folder holds people's pictures and
results; on a machine with other users, a 0644 file is anyone's to read. Every process ``make up``, ``make
worker`` and the service unit start runs under a 077 umask, so what they create is 0700/0600; code
that may run under another umask (``manage.py`` by hand, a test) sets the modes itself where it creates files.

``make up`` tightens a folder an older hub (or a person) left open (:func:`tighten`) and says what it changed in
one line; the system check ``hub.W002`` warns when the folder, the database, the logs or the media folder are
found open again (:func:`opened_up`). Nothing here imports Django: ``make up`` calls it before Django is set up.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

#: What group and others may do: none of it, on anything under the data folder.
OPEN_BITS = 0o077
#: What the system check looks at (a cheap look at each start, not a walk through thousands of results).
WATCHED = ("", "hub.sqlite3", "hub.sqlite3-wal", "hub.sqlite3-shm", "logs", "media")


def _mine(path: Path) -> os.stat_result | None:
    """``path``'s own status (a link is never followed) when this user owns it, else None: a chmod of someone
    else's file fails anyway, and a link may point outside the folder."""
    try:
        st = path.lstat()
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode) or st.st_uid != os.geteuid():
        return None
    return st


def _walk(folder: Path) -> Iterator[Path]:
    yield folder
    for root, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            yield Path(root) / name


def tighten(folder: Path) -> list[Path]:
    """Take group's and others' rights off ``folder`` and everything under it; returns what changed."""
    changed = []
    for path in _walk(folder):
        st = _mine(path)
        if st is None or not st.st_mode & OPEN_BITS:
            continue
        try:
            path.chmod(stat.S_IMODE(st.st_mode) & ~OPEN_BITS)
        except OSError:
            continue  # gone since the walk found it, or a read-only mount: the check says so later
        changed.append(path)
    return changed


def opened_up(data_dir: Path, names: Iterable[str] = WATCHED) -> list[Path]:
    """The watched paths (the data folder, its database, ``logs`` and the files in it, ``media``) that group or
    others may read, write or enter."""
    paths = [data_dir / name if name else data_dir for name in names]
    logs = data_dir / "logs"
    if logs.is_dir():
        paths += sorted(logs.iterdir())
    found = []
    for path in paths:
        st = _mine(path)
        if st is not None and st.st_mode & OPEN_BITS:
            found.append(path)
    return found


def tightened_line(folder: Path, changed: list[Path]) -> str:
    """``make up``'s one line about what :func:`tighten` changed."""
    shown = ", ".join(_shown(folder, p) for p in sorted(changed)[:3])
    more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
    return (
        f"the data folder {folder} was readable by other users of this machine: made {len(changed)} "
        f"file(s) and folder(s) the hub's alone ({shown}{more})"
    )


def opened_up_warning(data_dir: Path) -> str:
    """What start-up (check hub.W002) and the status page say when other users of the machine may read the hub's
    files, else ""."""
    found = opened_up(data_dir)
    return opened_up_line(data_dir, found) if found else ""


def opened_up_line(data_dir: Path, found: list[Path]) -> str:
    """The start-up warning: what is open, and the command that closes it."""
    shown = ", ".join(_shown(data_dir, p) for p in found[:4])
    more = f" and {len(found) - 4} more" if len(found) > 4 else ""
    return (
        f"other users of this machine may read the hub's files in {data_dir} ({shown}{more}): the database "
        f"holds sign-in sessions. `make up` makes them private, or run: chmod -R go-rwx {data_dir}"
    )


def _shown(folder: Path, path: Path) -> str:
    return "." if path == folder else str(path.relative_to(folder))


def private_file(path: Path) -> None:
    """Make ``path`` (a file this process just created, perhaps under a wider umask) 0600."""
    st = _mine(path)
    if st is not None and st.st_mode & OPEN_BITS:
        path.chmod(stat.S_IMODE(st.st_mode) & ~OPEN_BITS)
