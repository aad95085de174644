"""Beat-driven device polling. Tasks take ids, claim before acting, and are safe to run twice.

Also which devices' queues a worker consumes (``hub.celery``: a device's tasks go to its own queue): the named
ones under ``HUB_WORKER_DEVICES`` (none for ``none``), else every device, including those added while the worker
runs.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable

from celery import shared_task, signals
from django.db import connections
from django.utils import timezone

from devices.live import device_push
from devices.metrics import metrics_prune
from devices.models import Device
from devices.services import (
    device_claim_enqueue,
    device_poll_claim,
    device_poll_interval,
    device_refresh,
    device_tick_yields,
)
from hub.celery import consume_queues, device_queue, worker_device_names
from hub.env import SettingError
from hub.live import is_watched

logger = logging.getLogger("devices")


@shared_task(ignore_result=True, soft_time_limit=10, time_limit=15)
def poll_all() -> int:
    """Every 2 s (beat): enqueue ``poll_device`` for each device that is due. Returns how many."""
    now = timezone.now()
    enqueued = 0
    for device in Device.objects.only("pk", "next_poll_at", "active_until", "state", "reading_at"):
        watched = is_watched(f"device:{device.pk}")
        interval = device_poll_interval(device=device, watched=watched, now=now)
        # Due when its time has come, or when it sits on the slow schedule but someone started watching.
        due = (
            device.next_poll_at is None
            or device.next_poll_at <= now
            or (device.next_poll_at - now > interval)
        )
        if due and watched and device_tick_yields(device=device, now=now):
            continue  # the job's own requests come now: look again at the next beat (still due then)
        if due and device_claim_enqueue(device=device, interval=interval, now=now):
            # Expires: a poll that waited longer than a slow interval in a backed-up queue is worthless.
            poll_device.apply_async((device.pk,), expires=30, queue=device_queue(device.pk))
            enqueued += 1
    return enqueued


@shared_task(ignore_result=True, soft_time_limit=25, time_limit=30)
def poll_device(device_id: int) -> str | None:
    """Read the device once, record what happened, push the card and gauges."""
    with device_poll_claim(device_id=device_id) as held:
        if not held:
            return None  # another worker is polling it right now
        try:
            state = device_refresh(device_id=device_id)
        except Exception:
            logger.exception("polling device %s failed", device_id)
            return None
    device_push(device_id)
    return state


@shared_task(ignore_result=True)
def prune_metrics() -> int:
    return metrics_prune()


# -- which device queues a worker consumes -----------------------------------------------------------------------

#: How often a worker that drives every device looks for devices added since (their first polls wait that long).
FOLLOW_EVERY_S = 1.0


def worker_device_ids(names: Iterable[str]) -> list[int]:
    """The ids of the devices named (``HUB_WORKER_DEVICES``), in order; SettingError naming any unknown one."""
    names = list(dict.fromkeys(names))
    found = dict(Device.objects.filter(name__in=names).values_list("name", "pk"))
    unknown = [name for name in names if name not in found]
    if unknown:
        known = ", ".join(sorted(Device.objects.values_list("name", flat=True))) or "none yet"
        raise SettingError(
            f"HUB_WORKER_DEVICES names no device called {', '.join(repr(n) for n in unknown)} (devices: {known})"
        )
    return [found[name] for name in names]


def worker_device_queues() -> list[str]:
    """This worker's device queues now: its named devices' (``HUB_WORKER_DEVICES``; none for ``none``), else
    every device's."""
    names = worker_device_names()
    ids = worker_device_ids(names) if names is not None else list(Device.objects.values_list("pk", flat=True))
    return [device_queue(pk) for pk in ids]


def _read_in_main_process() -> list[str]:
    """``worker_device_queues`` read in the worker's main process, which forks the pool: its database connection
    is closed again at once, never inherited."""
    try:
        return worker_device_queues()
    finally:
        connections.close_all()


@signals.worker_init.connect
def choose_device_queues(sender=None, **_kwargs) -> None:
    """At the worker's start, before it consumes anything: add its device queues to the ones it consumes (the
    default queue, or what ``-Q`` chose). A name that is no device stops it with one line."""
    try:
        queues = _read_in_main_process()
    except SettingError as exc:
        err = sys.__stderr__ or sys.stderr
        err.write(f"tiiny-hub: {exc}\n")
        err.flush()
        os._exit(1)  # before any pool or consumer exists: nothing to clean up
    for name in queues:  # the banner's [queues] lists them
        sender.app.amqp.queues.select_add(name)


@signals.worker_ready.connect
def follow_new_devices(sender=None, **_kwargs) -> None:
    """A worker that drives every device takes the queue of a device added while it runs, within a second or so
    (and a worker whose devices could not be read at its start, once they can). A failure (the database away, a
    named device deleted) is logged once, not every round."""
    last_problem: list[str] = [""]

    def follow() -> None:
        try:
            consume_queues(sender, _read_in_main_process())
        except Exception as exc:  # noqa: BLE001 - the database away for a moment: next time
            problem = f"{type(exc).__name__}: {exc}"
            if problem != last_problem[0]:
                logger.warning("looking for this worker's devices failed (trying again): %s", problem)
            last_problem[0] = problem
        else:
            last_problem[0] = ""

    sender.timer.call_repeatedly(FOLLOW_EVERY_S, follow, priority=10)
