"""ETA accuracy: how far the predicted finish at start is from the real one, once a shape has history.

Runs real jobs through the real engine (a Celery worker and beat, a private Redis, a throw-away SQLite
database) against the time-scaled Tiiny emulator over HTTP. For each of three shapes it queues jobs one after
another; the prediction at start is ``started_at + estimate`` (the estimate the hub stored at submit time,
learned from the shape's earlier jobs), the truth is ``finished_at``. The error is measured on the jobs after
the first 5 of each shape. Target (issue 11): median error <= 10 %.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))
JOBS_PER_SHAPE = int(os.environ.get("BENCH_ETA_JOBS", "8"))
WARMUP = 5
SPEED = float(os.environ.get("BENCH_ETA_SPEED", "60"))


def main() -> None:
    from bench._hub import private_hub

    with private_hub("eta"):
        rows = run()
    report(rows)


def run() -> list[tuple[str, float, float]]:
    from devices.emulator.testing import run_tiiny
    from hub.accounts.models import User
    from hub.testing import start_beat, start_worker
    from jobs.doors.intake import submit_request
    from jobs.tests.conftest import ENGINE_ENV, make_device

    member = User.objects.create_user("bench", password="bench-pass-1", role="member")
    shapes = {
        "video 832x480 2 s 4 steps": (
            "video",
            {
                "model": "MiniMaxAI/MiniMax-H3-Turbo",
                "prompt": "fox",
                "size": "832x480",
                "seconds": 2,
                "steps": 4,
            },
        ),
        "image 512x512 8 steps": (
            "image",
            {"model": "Tongyi-MAI/Z-Image-Turbo", "prompt": "kite", "width": 512, "height": 512, "steps": 8},
        ),
        "speech 12 words": (
            "speech",
            {
                "model": "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
                "input": "one two three four five six seven eight nine ten eleven twelve",
                "voice": "serena",
                "response_format": "wav",
            },
        ),
    }
    env = {**ENGINE_ENV, "JOBS_POLL_INTERVAL_S": "0.1"}
    rows = []
    with run_tiiny(speed=SPEED, quirks="none") as emulator:
        device = make_device(emulator)
        worker, beat = start_worker("bench-eta", concurrency=2, **env), start_beat(**env)
        try:
            time.sleep(3)
            for label, (kind, data) in shapes.items():
                for i in range(JOBS_PER_SHAPE):
                    job, _adm = submit_request(owner=member, device=device, kind=kind, data=data)
                    deadline = time.monotonic() + 300
                    while time.monotonic() < deadline:
                        job.refresh_from_db()
                        if job.is_final:
                            break
                        time.sleep(0.2)
                    if job.state != "done":
                        raise SystemExit(
                            f"{label} #{i} ended {job.state}: {job.error_human}\n{worker.log_tail(40)}"
                        )
                    actual = (job.finished_at - job.started_at).total_seconds()
                    if i >= WARMUP:
                        rows.append((label, job.estimate_s, actual))
        finally:
            worker.stop()
            beat.stop()
    return rows


def report(rows: list[tuple[str, float, float]]) -> None:
    errors = [abs(pred - actual) / actual for _label, pred, actual in rows]
    median = statistics.median(errors) if errors else float("nan")
    print("## ETA accuracy (bench_eta.py)\n")
    print(
        f"Real jobs through the engine on the Tiiny emulator (speed {SPEED:g}), {JOBS_PER_SHAPE} per shape; "
        f"error of the predicted finish at start for the jobs after the first {WARMUP} of each shape.\n"
    )
    print("| shape | jobs | predicted (s) | actual (s) | median error |")
    print("|---|---|---|---|---|")
    for label in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == label]
        errs = [abs(p - a) / a for _l, p, a in mine]
        print(
            f"| {label} | {len(mine)} | {statistics.median(p for _l, p, _a in mine):.2f} | "
            f"{statistics.median(a for _l, _p, a in mine):.2f} | {statistics.median(errs) * 100:.1f} % |"
        )
    verdict = "meets it" if median <= 0.10 else "MISSES it"
    print(f"\nMedian error over all: **{median * 100:.1f} %**. Target: <= 10 % — {verdict}.")


if __name__ == "__main__":
    main()
