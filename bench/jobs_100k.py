"""The 100,000-job household the page benchmarks share (bench_jobs.py, bench_pages.py); not a benchmark itself.

5 people, 2 devices, about two years of finished work (~1,000 jobs a week) and 300 waiting. Django must be set
up (and the database migrated) by the caller.
"""

from __future__ import annotations

import datetime as dt
import random

WAITING = 300
PEOPLE = 5
PASSWORD = "bench-pass-1"


def build(total: int, *, predictions: bool = True) -> tuple[list, list]:
    """Fill the empty database; returns (people, devices). With ``predictions`` each device's plan is stored
    as the hub keeps it (every change replans), so the plan shows start/ready times and bars."""
    from django.utils import timezone

    from devices.models import Device
    from hub.accounts.services import user_create_or_update
    from jobs.models import Job, JobKind, JobState

    people = [
        user_create_or_update(username=f"p{i}", role="member", password=PASSWORD).user for i in range(PEOPLE)
    ]
    devices = [Device.objects.create(name=f"d{i}", kind="tiiny", base_url=f"http://10.0.0.{i}", state="online")
               for i in range(2)]  # fmt: skip
    rng = random.Random(7)
    now = timezone.now()
    words = "fox snow river neon city cat robot forest ocean dawn lantern violin".split()
    batch = []
    for i in range(total):
        waiting = i >= total - WAITING
        created = now - dt.timedelta(minutes=(total - i) * 10)
        batch.append(Job(
            owner=people[i % PEOPLE], device=devices[i % 2], kind=rng.choice(JobKind.values), model_id="m",
            prompt=" ".join(rng.choices(words, k=6)), params={"prompt": "x"},
            state=JobState.QUEUED if waiting else rng.choice([JobState.DONE] * 8 + [JobState.FAILED, JobState.CANCELLED]),
            finished_at=None if waiting else created + dt.timedelta(minutes=7),
            device_seconds=0 if waiting else 420.0, shared=i % 7 == 0, estimate_s=420.0,
        ))  # fmt: skip
        if len(batch) == 5000:
            Job.objects.bulk_create(batch)
            batch = []
    Job.objects.bulk_create(batch)
    Job.objects.filter(pk__in=Job.objects.order_by("-pk").values("pk")[:WAITING]).update(
        created=timezone.now()
    )
    if predictions:
        store_plans(devices)
    return people, devices


def store_plans(devices: list) -> None:
    """What ``jobs.queue.eta.plan_device`` stores, without its push (no websocket is listening while we build)."""
    from jobs.queue.eta import store_plan

    for device in devices:
        store_plan(device.pk)
