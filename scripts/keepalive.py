#!/usr/bin/env python
"""Run a command and start it again if it dies (`make up` runs the web server, worker and beat under it).

A crashed or killed worker comes back by itself; its jobs resume from the database (reconcile revives their
polls). SIGINT/SIGTERM are passed on to the command and then keepalive exits, so Ctrl-C still stops
everything. A command that keeps dying at once is given up after a few tries.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

RESTART_DELAY_S = 1.0
QUICK_DEATH_S = 5.0  # a run shorter than this counts toward giving up
MAX_QUICK_DEATHS = 5


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
    quick_deaths = 0
    while True:
        started = time.monotonic()
        child = subprocess.Popen(argv)
        code = child.wait()
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
