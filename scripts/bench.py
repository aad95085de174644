#!/usr/bin/env python
"""`make bench`: run every bench/bench_*.py and collect their markdown into bench/RESULTS.md.

Each benchmark is a script that prints one markdown section (a heading, what was measured, the numbers and
the target) to stdout and exits 0. Targets live here, never in timed tests.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
BENCH = BASE / "bench"


def _kept_sections() -> list[str]:
    """Sections other commands write into RESULTS.md (their heading ends "(make chaos)", say): kept as they are."""
    path = BENCH / "RESULTS.md"
    if not path.exists():
        return []
    parts = path.read_text().split("\n## ")
    return [
        "## " + part.rstrip() + "\n"
        for part in parts[1:]
        if part.split("\n", 1)[0].rstrip().endswith(")") and "(make " in part.split("\n", 1)[0]
    ]


# Benchmarks run again with other settings: the night on the small profile too (issue 24: its targets must hold there).
AGAIN = {"bench_night.py": [{"BENCH_PROFILE": "small"}]}


def main() -> int:
    scripts = sorted(BENCH.glob("bench_*.py"))
    runs = [(s, {}) for s in scripts] + [(s, extra) for s in scripts for extra in AGAIN.get(s.name, [])]
    runs.sort(key=lambda run: run[0].name)
    sections = []
    failed = 0
    env = dict(os.environ, PYTHONPATH=str(BASE), DJANGO_SETTINGS_MODULE="hub.settings")
    env.setdefault("HUB_SECRET_KEY", "bench-only-secret")
    for script, extra in runs:
        shown = " ".join([script.name, *(f"{k}={v}" for k, v in extra.items())])
        print(f"bench: {shown} …", flush=True)
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, str(script)], cwd=BASE, env={**env, **extra}, capture_output=True, text=True
        )
        took = time.monotonic() - started
        if result.returncode != 0:
            failed += 1
            sections.append(
                f"## {shown}\n\nFAILED (exit {result.returncode}):\n\n```\n{result.stderr[-2000:]}\n```\n"
            )
        else:
            out = result.stdout.strip()
            if not out.startswith("#"):  # a plain-text report: keep it verbatim under the script's name
                out = f"## {script.name}\n\n```\n{out}\n```"
            sections.append(out + f"\n\n_(ran in {took:.1f} s)_\n")
    kept = _kept_sections()
    header = (
        "# Benchmark results\n\n"
        f"Written by `make bench` on {time.strftime('%Y-%m-%d %H:%M %Z')} — {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}.\n"
    )
    (BENCH / "RESULTS.md").write_text(header + "\n" + "\n".join(sections + kept))
    print(f"bench: wrote bench/RESULTS.md ({len(runs)} runs, {failed} failed)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
