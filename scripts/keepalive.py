#!/usr/bin/env python
"""Run a command and start it again if it dies (`make up` runs the web server, worker and beat under it).

A crashed or killed worker comes back by itself; its jobs resume from the database (reconcile revives their
polls). SIGINT/SIGTERM are passed on to the command and then keepalive exits, so Ctrl-C still stops
everything. A command that keeps dying at once is given up after a few tries.

A command may be a tree of processes (the web server is a parent and its workers, hub/webserver.py). When its
parent dies alone (SIGKILL, the OOM killer), its children would live on without it: holding the port, so the
command could never start again, and holding the log pipe, so ``make up`` could not even tell it had stopped.
On Linux keepalive is therefore their subreaper (orphans of the command become keepalive's children, not
init's), and it stops whatever the command left behind before starting it again, or before exiting.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
LEFTOVER_GRACE_S = 3.0  # SIGTERM first (a server finishes what it was answering), then SIGKILL
RESTART_DELAY_S = 1.0
QUICK_DEATH_S = 5.0  # a run shorter than this counts toward giving up
MAX_QUICK_DEATHS = 5


def become_subreaper() -> bool:
    """Linux: descendants that lose their parent are re-parented to this process instead of init."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def children() -> list[int]:
    """This process's children, from /proc (Linux; elsewhere none are found)."""
    me, found = os.getpid(), []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == me:
            found.append(int(entry))
    return found


def stop_leftovers() -> list[int]:
    """Stop and reap what the command left behind (it has exited: every child of ours now is an orphan of it)."""
    stopped: list[int] = []
    for sig, wait_s in ((signal.SIGTERM, LEFTOVER_GRACE_S), (signal.SIGKILL, 5.0)):
        deadline = time.monotonic() + wait_s
        for pid in children():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                continue
            stopped.append(pid)
        while time.monotonic() < deadline:
            for pid in children():
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
            if not children():
                return sorted(set(stopped))
            time.sleep(0.05)
    return sorted(set(stopped))


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: keepalive.py COMMAND [ARGS...]", file=sys.stderr)
        return 2
    stopping = False
    child: subprocess.Popen | None = None

    def forward(signum, _frame):
        nonlocal stopping
        stopping = True
        if child and child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    become_subreaper()
    quick_deaths = 0
    while True:
        started = time.monotonic()
        child = subprocess.Popen(argv)
        code = child.wait()
        left = stop_leftovers()
        if left and not stopping:
            print(
                f"keepalive: stopped {len(left)} process(es) {shlex.join(argv[:4])} left behind",
                file=sys.stderr,
                flush=True,
            )
        if stopping:
            return 0 if code in (0, -signal.SIGTERM, -signal.SIGINT) else code
        quick_deaths = quick_deaths + 1 if time.monotonic() - started < QUICK_DEATH_S else 0
        if quick_deaths >= MAX_QUICK_DEATHS:
            print(
                f"keepalive: {argv[0]} keeps exiting (last code {code}); giving up",
                file=sys.stderr,
                flush=True,
            )
            return code or 1
        print(
            f"keepalive: {' '.join(argv[:4])} exited with {code}; starting it again",
            file=sys.stderr,
            flush=True,
        )
        time.sleep(RESTART_DELAY_S)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
