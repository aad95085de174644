"""What ``make up`` started, written down so the next ``make up`` can stop what an earlier one left running.

``<data dir>/run/up.json`` holds, for the supervisor (scripts/up.py), its helper processes and each process it
started: the pid, the start time (field 22 of ``/proc/<pid>/stat``, in clock ticks since boot) and the command.
A process is this hub's only while all three still agree: a pid the kernel gave to someone else since has
another start time, and is never touched. What runs *under* a recorded process (the web server under its
keepalive, Celery's pool) is found by ancestry when it is stopped. Linux only (``/proc``); elsewhere nothing
is found and nothing is stopped.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

RECORD = "up.json"
STOP_GRACE_S = 3.0  # SIGTERM first, then SIGKILL


@dataclass(frozen=True)
class Entry:
    name: str
    pid: int
    start: int
    cmd: list[str] = field(default_factory=list)


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (after the command name, which may hold spaces and parentheses)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (stat field 22); None when there is no such process."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def state(pid: int) -> str:
    """R, S, T (stopped), Z (zombie)…; "" when there is no such process."""
    fields = _stat_fields(pid)
    return fields[0] if fields else ""


def alive(pid: int, start: int) -> bool:
    """The very process (same pid, same start) still runs: not gone, not a zombie waiting to be reaped."""
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] != "Z" and int(fields[19]) == start


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def settled_cmdline(pid: int, wait_s: float = 0.5) -> list[str]:
    """``cmdline``, read again for up to ``wait_s`` while it is empty: a process caught in its exec shows an empty
    command line for a moment (a third of the reads right after ``subprocess.Popen`` returned, on a busy 2-core
    box). Empty still for a process that is gone, a zombie, or a kernel thread."""
    deadline = time.monotonic() + wait_s
    while not (now := cmdline(pid)) and state(pid) not in ("", "Z") and time.monotonic() < deadline:
        time.sleep(0.01)
    return now


def program(cmd: list[str]) -> str:
    """The program a command line runs: its first word's file name. A process that renames itself (redis-server
    shows ``redis-server 127.0.0.1:6390``) keeps it."""
    return Path(cmd[0].split()[0]).name if cmd and cmd[0].split() else ""


def entry(name: str, pid: int, cmd: list[str] | None = None) -> Entry | None:
    """``pid`` as it runs now (its command read from /proc unless given), or None when it is gone."""
    start = start_time(pid)
    if start is None:
        return None
    return Entry(name, pid, start, list(cmd) if cmd is not None else settled_cmdline(pid))


def is_ours(item: Entry) -> bool:
    """Still the process that was recorded: same pid, same start time, same program (a reused pid is not)."""
    if not alive(item.pid, item.start):
        return False
    now = settled_cmdline(item.pid)
    return now == item.cmd or program(now) == program(item.cmd)


def write(run_dir: Path, entries: Iterable[Entry]) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / RECORD
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"processes": [asdict(e) for e in entries]}, indent=1))
    tmp.replace(path)
    return path


def read(run_dir: Path) -> list[Entry]:
    """The recorded processes; none when there is no record or it cannot be read (a half-written file)."""
    try:
        data = json.loads((run_dir / RECORD).read_text())
        return [
            Entry(str(p["name"]), int(p["pid"]), int(p["start"]), list(p["cmd"])) for p in data["processes"]
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def clear(run_dir: Path) -> None:
    (run_dir / RECORD).unlink(missing_ok=True)


def _children_map() -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for name in entries:
        if name.isdigit() and (fields := _stat_fields(int(name))):
            found.setdefault(int(fields[1]), []).append(int(name))
    return found


def with_descendants(roots: Iterable[Entry]) -> list[Entry]:
    """The recorded processes and everything running under them now (each with its own start time)."""
    kids = _children_map()
    out: dict[int, Entry] = {}
    todo = [(r.name, r.pid) for r in roots]
    while todo:
        name, pid = todo.pop()
        if pid in out or (found := entry(name, pid)) is None:
            continue
        out[pid] = found
        todo.extend((name, child) for child in kids.get(pid, []))
    return list(out.values())


def _signal(items: Iterable[Entry], sig: int) -> None:
    for item in items:
        if alive(item.pid, item.start):  # checked again right before: never a pid someone else has now
            try:
                os.kill(item.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def stop(items: list[Entry], grace_s: float = STOP_GRACE_S) -> list[Entry]:
    """SIGTERM (and SIGCONT, for a stopped one) to each, SIGKILL to what is left after ``grace_s``; what still
    runs at the end is returned."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        _signal(items, sig)
        if sig == signal.SIGTERM:
            _signal(items, signal.SIGCONT)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            items = [i for i in items if alive(i.pid, i.start)]
            if not items:
                return []
            time.sleep(0.05)
    return [i for i in items if alive(i.pid, i.start)]


def leftovers(run_dir: Path) -> list[Entry]:
    """What an earlier ``make up`` on this data folder started and still runs (with what runs under it)."""
    return with_descendants([e for e in read(run_dir) if is_ours(e)])
