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

Keepalive follows its own parent (``make up``'s supervisor): when that goes, however it went (a SIGKILL, the OOM
killer), keepalive stops its command and everything under it within a few seconds, and exits. On Linux the
kernel tells it (``PR_SET_PDEATHSIG``, asked for before the parent is checked, so a parent that died in between
is seen too); elsewhere a thread watches the parent's pid. The command itself gets the same signal when keepalive
goes (a SIGKILLed keepalive leaves no command behind).

``--once``: no restarts, for processes whose death should stop the hub (the private Redis, the emulator). On
Linux keepalive then becomes the command (exec) after asking the kernel for the parent-death signal, which exec
keeps: one process fewer, same guarantee.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PR_SET_CHILD_SUBREAPER = 36
PARENT_ENV = "HUB_KEEPALIVE_PARENT"  # the supervisor's pid, set by scripts/up.py (else our parent at start)
ORPHAN_GRACE_S = (
    2.0  # parent gone: the command has this long to stop on SIGTERM, then everything is SIGKILLed
)
PARENT_POLL_S = 0.5
LEFTOVER_GRACE_S = 3.0  # SIGTERM first (a server finishes what it was answering), then SIGKILL
RESTART_DELAY_S = 1.0
QUICK_DEATH_S = 5.0  # a run shorter than this counts toward giving up
MAX_QUICK_DEATHS = 5


def _libc():
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


LIBC = _libc()  # loaded once, so a forked child calls prctl without loading anything


def _prctl(option: int, value: int) -> bool:
    try:
        return LIBC is not None and LIBC.prctl(option, value, 0, 0, 0) == 0
    except AttributeError:  # no prctl (not Linux)
        return False


def become_subreaper() -> bool:
    """Linux: descendants that lose their parent are re-parented to this process instead of init."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Linux: the kernel sends ``sig`` when the parent goes (the parent *thread* that forked us: the supervisor
    forks from its main thread). Kept across exec; False where there is no such thing."""
    return _prctl(PR_SET_PDEATHSIG, int(sig))


def expected_parent() -> int:
    """The supervisor we follow: named by it in the environment (not inherited further), else our parent now."""
    named = os.environ.pop(PARENT_ENV, "")
    return int(named) if named.isdigit() else os.getppid()


def watch_parent(parent: int) -> None:
    """The portable fallback: SIGTERM ourselves once ``parent`` is no longer our parent."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os.kill(os.getpid(), signal.SIGTERM)


def say(text: str) -> None:
    """A line on stderr, which may be a pipe nobody reads any more (the supervisor is gone): never fail on it."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


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


def _reap() -> None:
    for pid in children():
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def stop_leftovers(grace_s: float = LEFTOVER_GRACE_S) -> list[int]:
    """Stop and reap what the command left behind (it has exited: every child of ours now is an orphan of it).

    SIGTERM, then after ``grace_s`` SIGKILL, to every child, again and again: killing one re-parents its own
    children to us, and they go the same way."""
    stopped: set[int] = set()
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        deadline = time.monotonic() + wait_s
        while True:
            _reap()
            left = children()
            if not left:
                return sorted(stopped)
            if time.monotonic() >= deadline:
                break
            for pid in left:
                if sig == signal.SIGKILL or pid not in stopped:
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        continue
                    stopped.add(pid)
            time.sleep(0.05)
    return sorted(stopped)


def run_once_in_place(argv: list[str], parent: int) -> int:
    """``--once`` on Linux: become the command, which dies with our parent (the signal survives exec)."""
    if not die_with_parent():
        return -1
    if os.getppid() != parent:  # gone before the kernel was asked
        return 0
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        say(f"keepalive: cannot run {argv[0]}: {exc}")
        return 127
    return 127  # not reached


def main(argv: list[str]) -> int:
    once = bool(argv) and argv[0] == "--once"
    argv = argv[1:] if once else argv
    if not argv:
        say("usage: keepalive.py [--once] COMMAND [ARGS...]")
        return 2
    parent = expected_parent()
    if once and (code := run_once_in_place(argv, parent)) >= 0:
        return code
    return Keeper(argv, parent, restart=not once).run()


class Keeper:
    """Runs the command (again and again unless ``restart`` is off) until told to stop or orphaned."""

    def __init__(self, argv: list[str], parent: int, *, restart: bool = True) -> None:
        self.argv, self.parent, self.restart = argv, parent, restart
        self.stopping = False
        self.orphaned_at: float | None = None
        self.child: subprocess.Popen | None = None

    def on_signal(self, signum, _frame) -> None:
        self.stopping = True
        if self.orphaned_at is None and os.getppid() != self.parent:
            self.orphaned_at = time.monotonic()
        if self.child and self.child.poll() is None:
            self.child.send_signal(signum)

    def wait_child(self) -> int:
        """The command's exit code; once orphaned, it gets ORPHAN_GRACE_S, then SIGKILL."""
        assert self.child is not None
        while True:
            timeout = None
            if self.orphaned_at is not None:
                timeout = max(0.0, self.orphaned_at + ORPHAN_GRACE_S - time.monotonic())
            try:
                return self.child.wait(timeout=timeout if timeout is None else max(timeout, 0.01))
            except subprocess.TimeoutExpired:
                self.child.kill()

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        become_subreaper()
        kernel_watches = die_with_parent()
        if os.getppid() != self.parent:  # the supervisor went before we could follow it
            return 0
        if not kernel_watches:
            threading.Thread(target=watch_parent, args=(self.parent,), daemon=True).start()
        # The command dies with us too (Linux): a SIGKILLed keepalive leaves no command behind. No preexec
        # function where a watching thread runs (fork with threads: only the async-signal-safe is safe).
        preexec = die_with_parent if kernel_watches else None
        quick_deaths = 0
        while True:
            started = time.monotonic()
            self.child = subprocess.Popen(self.argv, preexec_fn=preexec)
            code = self.wait_child()
            grace = LEFTOVER_GRACE_S
            if self.orphaned_at is not None:
                grace = max(0.0, self.orphaned_at + ORPHAN_GRACE_S - time.monotonic())
            left = stop_leftovers(grace)
            if left and not self.stopping:
                say(f"keepalive: stopped {len(left)} process(es) {shlex.join(self.argv[:4])} left behind")
            if self.stopping:
                return 0 if code in (0, -signal.SIGTERM, -signal.SIGINT) else code
            if not self.restart:
                return code
            quick_deaths = quick_deaths + 1 if time.monotonic() - started < QUICK_DEATH_S else 0
            if quick_deaths >= MAX_QUICK_DEATHS:
                say(f"keepalive: {self.argv[0]} keeps exiting (last code {code}); giving up")
                return code or 1
            say(f"keepalive: {' '.join(self.argv[:4])} exited with {code}; starting it again")
            time.sleep(RESTART_DELAY_S)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
