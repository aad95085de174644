"""``GET /metrics``: the hub in Prometheus' text format, computed at scrape time from the shared truth.

Several web and worker processes on several machines serve one hub, so nothing here is an in-process
counter of something another process does:

* jobs, queues (each device's lane and the pool of them), device states, device time and render times are read
  from the database on each scrape (five queries);
* device request errors and open websockets are kept in Redis, written by whichever process saw them;
* the worker heartbeat is the sorted set ``hub.health`` already reads.

Everything is exported through a private ``CollectorRegistry``: the global default registry would also
export the metrics of this one process as if they were the hub's. The web process's own ``process_*``
metrics are added on purpose (they describe whichever web process answered the scrape).

Access: the client addresses in ``HUB_METRICS_ALLOW``, an admin's API token (``Authorization: Bearer``),
or a signed-in admin's browser. Everyone else gets a short 403, never the sign-in page.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import ipaddress
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import redis
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.cache import cache
from django.db import DatabaseError
from django.db.models import Count, Max, Min, Q, Sum
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from backups.services import last_runs
from devices.error_counts import DEVICE_ERRORS_KEY
from devices.models import Device
from hub import disk
from hub.accounts.tokens import TokenInvalid, token_authenticate
from hub.celery import WORKER_HEARTBEAT_KEY
from hub.version import __version__, commit
from jobs.models import ACTIVE_STATES, WAITING_STATES, DeviceUse, Job, JobKind, JobState

log = logging.getLogger(__name__)

# Redis keys (shared by every process of the hub).
WS_COUNTS_KEY = "hub:metrics:ws:counts"  # hash: "<host>:<pid>" -> sockets that process holds now
WS_SEEN_KEY = "hub:metrics:ws:seen"  # sorted set: "<host>:<pid>" -> unix time it last said it lives
WS_HEARTBEAT_S = 30.0
WS_STALE_S = 90.0  # a process silent this long died without closing its sockets: its count is dropped

# Render times run from seconds (speech) to the device's 60-minute cut-off (a long video).
RENDER_BUCKETS = (5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0)
UNREGISTERED = "unregistered"  # errors from URLs no device row has (test connection, discovery)


def _redis() -> redis.Redis:
    return _redis_for(settings.REDIS_URL)


@functools.cache
def _redis_for(url: str) -> redis.Redis:
    # One pool per URL and process; short timeouts, because a counter must never hold up a device call.
    return redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=1)


# --- open websockets ------------------------------------------------------------------------------------
# Each process publishes the number of sockets it holds itself (an absolute value, so a lost write or a
# flushed Redis heals at the next change or heartbeat); a heartbeat thread keeps its entry fresh, and a
# process that died without closing its sockets drops out of the sum after WS_STALE_S.
_ws_lock = threading.Lock()
_ws_write_lock = threading.Lock()
_ws_open = 0
_ws_heartbeat_pid: int | None = None


def _process_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


async def ws_opened(consumer: Any) -> None:
    """Call after ``accept()``. Idempotent per consumer."""
    if getattr(consumer, "_hub_metrics_open", False):
        return
    consumer._hub_metrics_open = True
    await _ws_change(+1)


async def ws_closed(consumer: Any) -> None:
    """Call from ``disconnect``. Counts only sockets ``ws_opened`` counted (a refused handshake never was)."""
    if not getattr(consumer, "_hub_metrics_open", False):
        return
    consumer._hub_metrics_open = False
    await _ws_change(-1)


async def _ws_change(delta: int) -> None:
    global _ws_open
    with _ws_lock:
        _ws_open = max(0, _ws_open + delta)
    _ensure_ws_heartbeat()
    await asyncio.to_thread(_ws_publish)  # never block the event loop on Redis


def _ws_publish() -> None:
    # Read the count under the write lock, so a slow earlier write can't overwrite a newer value.
    with _ws_write_lock:
        with _ws_lock:
            count = _ws_open
        proc = _process_id()
        try:
            pipe = _redis().pipeline(transaction=False)
            pipe.hset(WS_COUNTS_KEY, proc, count)
            pipe.zadd(WS_SEEN_KEY, {proc: time.time()})
            pipe.execute()
        except redis.RedisError:
            log.debug("websocket count not published: Redis unreachable")


def _ensure_ws_heartbeat() -> None:
    global _ws_heartbeat_pid
    with _ws_lock:
        if _ws_heartbeat_pid == os.getpid():  # (a forked child needs its own thread)
            return
        _ws_heartbeat_pid = os.getpid()
    threading.Thread(target=_ws_heartbeat, name="hub-metrics-ws", daemon=True).start()


def _ws_heartbeat() -> None:
    while True:
        time.sleep(WS_HEARTBEAT_S)
        _ws_publish()


# --- the collector --------------------------------------------------------------------------------------
class HubCollector(Collector):
    """Builds every ``tiiny_hub_*`` family at scrape time: 7 database queries and 1–2 Redis round trips."""

    def describe(self) -> list:
        return []  # don't let registration run a scrape (and its queries) at import time

    def collect(self) -> Iterator[Any]:
        devices = list(
            Device.objects.order_by("pk").values_list("pk", "name", "state", "base_url", "queue_paused")
        )
        names = {pk: name for pk, name, *_ in devices}
        usable = {pk for pk, _, state, _, paused in devices if _usable(state, paused)}
        lanes = _lane_rows(names)
        yield _jobs_family()
        yield from _queue_families(names, lanes, usable=usable)
        yield _device_state_family(devices)
        yield _device_seconds_family(names, lanes)
        yield _render_family(list(names))
        yield from _redis_families(devices)
        yield from _backup_families()


def _jobs_family() -> GaugeMetricFamily:
    # Every state x kind, zeros included, so a series never vanishes when its last job moves on.
    counts = dict.fromkeys(((s, k) for s in JobState.values for k in JobKind.values), 0)
    for state, kind, n in Job.objects.order_by().values_list("state", "kind").annotate(n=Count("pk")):
        counts[(state, kind)] = n
    family = GaugeMetricFamily("tiiny_hub_jobs", "Jobs by state and kind.", labels=["state", "kind"])
    for (state, kind), n in counts.items():
        family.add_metric([state, kind], n)
    return family


def _usable(state: str, paused: bool) -> bool:
    """The device may start work now: not away (``jobs.core.scheduler.blocked_reason``), its lane not paused."""
    return state not in Device.QUEUE_BLOCKING_STATES and not paused


def _lane_rows(names: dict[int, str]) -> dict[int, dict[str, Any]]:
    """Per device, its waiting and active jobs' numbers: one query over (device, state), the
    jobs_device_state_idx index. The plan (jobs.queue.eta.plan_device) stores every active and waiting job's
    predicted finish; the latest one is when the queue drains. A job the plan has not reached yet adds its
    estimate. The job holding the device (one a device) gives the start of its running span."""
    waiting, active = Q(state__in=WAITING_STATES), Q(state__in=ACTIVE_STATES)
    return {
        row["device_id"]: row
        for row in Job.objects.filter(device_id__in=list(names), state__in=[*WAITING_STATES, *ACTIVE_STATES])
        .order_by()
        .values("device_id")
        .annotate(
            waiting=Count("pk", filter=waiting),
            waiting_any=Count("pk", filter=waiting & Q(pinned=False)),
            active=Count("pk", filter=active),
            running_since=Min("started_at", filter=active),
            last_finish=Max("predicted_finish"),
            unplanned=Sum("estimate_s", filter=Q(predicted_finish__isnull=True)),
        )
    }


def _queue_families(
    names: dict[int, str], rows: dict[int, dict[str, Any]], *, usable: set[int]
) -> Iterator[GaugeMetricFamily]:
    """Each device's lane (queue depth, of it for any device, busy, usable, drain time) and the pool's."""
    depth = GaugeMetricFamily(
        "tiiny_hub_queue_depth", "Jobs waiting for the device (queued or scheduled).", labels=["device"]
    )
    depth_any = GaugeMetricFamily(
        "tiiny_hub_queue_depth_any",
        "Of the jobs waiting in the device's lane, those for any device (the pool may move them to another).",
        labels=["device"],
    )
    busy = GaugeMetricFamily("tiiny_hub_device_busy", "1 while a job holds the device.", labels=["device"])
    can_start = GaugeMetricFamily(
        "tiiny_hub_device_usable",
        "1 when the device may start work: not locked, unreachable or refusing the key, its lane not paused.",
        labels=["device"],
    )
    drain = GaugeMetricFamily(
        "tiiny_hub_queue_drain_seconds",
        "Predicted seconds until the device has finished its running and waiting jobs (from the stored plan).",
        labels=["device"],
    )
    now = timezone.now()
    for pk, name in names.items():
        row = rows.get(pk, {})
        last_finish = row.get("last_finish")
        seconds = max(0.0, (last_finish - now).total_seconds()) if last_finish else 0.0
        depth.add_metric([name], row.get("waiting", 0))
        depth_any.add_metric([name], row.get("waiting_any", 0))
        busy.add_metric([name], 1 if row.get("active") else 0)
        can_start.add_metric([name], 1 if pk in usable else 0)
        drain.add_metric([name], seconds + (row.get("unplanned") or 0.0))
    yield from (depth, depth_any, busy, can_start, drain)
    yield from _pool_families(names, rows, usable)


def _pool_families(
    names: dict[int, str], rows: dict[int, dict], usable: set[int]
) -> Iterator[GaugeMetricFamily]:
    """The pool as a whole, from the lanes' numbers (no read of its own)."""
    devices = GaugeMetricFamily("tiiny_hub_pool_devices_usable", "Devices that may start work now.")
    devices.add_metric([], len(usable & set(names)))
    waiting = GaugeMetricFamily(
        "tiiny_hub_pool_waiting_jobs", "Jobs waiting for any device, over every lane."
    )
    waiting.add_metric([], sum(row.get("waiting_any", 0) for row in rows.values()))
    # The pool moves a job for any device to a lane that may start work (jobs.queue.pool): one still in a lane
    # that may not has no device of its pool that may (or waits for the next rebalance, a moment at most).
    stranded = GaugeMetricFamily(
        "tiiny_hub_pool_stranded_jobs",
        "Jobs for any device waiting in the lane of a device that may not start work (none of theirs may).",
    )
    stranded.add_metric([], sum(row.get("waiting_any", 0) for pk, row in rows.items() if pk not in usable))
    yield from (devices, waiting, stranded)


def _device_seconds_family(names: dict[int, str], lanes: dict[int, dict[str, Any]]) -> CounterMetricFamily:
    """Measured device time per device (``DeviceUse``: what quotas and fair share count), the running span so far
    included: ``rate()`` of it is the device's utilisation."""
    family = CounterMetricFamily(
        "tiiny_hub_device_seconds",
        "Device seconds the hub measured jobs holding the device (model loads, renders, downloads), the "
        "running job's so far included.",
        labels=["device"],
    )
    now = timezone.now()
    totals = _spans_before(_cutoff(now))
    # The spans since the cutoff, a day's or so, found on the (ended) index and added up here: grouped in SQL,
    # SQLite walked the whole table on the device index for its GROUP BY (29 ms at 100k spans, for none).
    for device, seconds in DeviceUse.objects.filter(ended__gte=_cutoff(now)).values_list(
        "device_id", "seconds"
    ):
        totals[device] = totals.get(device, 0.0) + float(seconds or 0.0)
    for pk, name in names.items():
        since = lanes.get(pk, {}).get("running_since")
        running = max(0.0, (now - since).total_seconds()) if since else 0.0
        family.add_metric([name], totals.get(pk, 0.0) + running)
    return family


#: Where the spans summed once a day end: the sum of every span ever was most of a scrape (53 of 64 ms at 100k
#: spans on SQLite); the spans before the day's start (less an hour: a span is recorded as it ends, never later)
#: are summed once a day and kept in Redis, the day's are read on each scrape.
SPANS_KEY = "metrics:device-seconds-before:{:%Y-%m-%d}"


def _cutoff(now: dt.datetime) -> dt.datetime:
    return (now - dt.timedelta(hours=1)).astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def _spans_before(cutoff: dt.datetime) -> dict[int, float]:
    """Device seconds per device of the spans that ended before ``cutoff`` (kept for two days; read afresh when
    Redis has lost it or is away)."""
    key = SPANS_KEY.format(cutoff)
    try:
        kept = cache.get(key)
    except Exception:  # noqa: BLE001 - no Redis: the sum is read from the database
        kept = None
    if kept is not None:  # pairs: the cache keeps JSON, whose keys would come back strings
        return {int(device): float(seconds) for device, seconds in kept}
    rows = (
        DeviceUse.objects.filter(ended__lt=cutoff)
        .order_by()
        .values("device_id")
        .annotate(s=Sum("seconds"))
        .values_list("device_id", "s")
    )
    totals = {device: float(seconds or 0.0) for device, seconds in rows}
    try:
        cache.set(key, list(totals.items()), timeout=2 * 24 * 3600)
    except Exception:  # noqa: BLE001
        log.debug("the device seconds before %s are not kept: Redis unreachable", cutoff)
    return totals


def _device_state_family(devices: list[tuple]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "tiiny_hub_device_state",
        "1 for the device's current state, 0 for the others.",
        labels=["device", "state"],
    )
    for _, name, current, *_ in devices:
        for state in Device.State.values:
            family.add_metric([name, state], 1 if state == current else 0)
    return family


def _render_family(device_ids: list[int]) -> HistogramMetricFamily:
    days = settings.HUB_METRICS_RENDER_DAYS
    family = HistogramMetricFamily(
        "tiiny_hub_render_seconds",
        f"Device seconds of the jobs finished (done) in the last {days} days, by kind. A window, not a "
        "counter: read quantiles from it, not rate().",
        labels=["kind"],
    )
    cutoff = timezone.now() - dt.timedelta(days=days)
    # Bounded by (device, finished_at): the jobs_device_fair_idx index. "done" is a filter of the aggregates,
    # not of the WHERE: given (device, state) there, an ANALYZEd SQLite prefers jobs_device_state_idx and reads
    # every done job ever (measured: 12 ms -> 54 ms at 100k jobs). Buckets are counted in SQL.
    done = Q(state=JobState.DONE)
    buckets = {
        f"le{i}": Count("pk", filter=done & Q(device_seconds__lte=b)) for i, b in enumerate(RENDER_BUCKETS)
    }
    rows = {
        row["kind"]: row
        for row in Job.objects.filter(device_id__in=device_ids, finished_at__gte=cutoff, device_seconds__gt=0)
        .order_by()
        .values("kind")
        .annotate(n=Count("pk", filter=done), total=Sum("device_seconds", filter=done), **buckets)
    }
    for kind in JobKind.values:
        row = rows.get(kind, {})
        cumulative = [(_le(b), row.get(f"le{i}", 0)) for i, b in enumerate(RENDER_BUCKETS)]
        family.add_metric([kind], [*cumulative, ("+Inf", row.get("n", 0))], sum_value=row.get("total") or 0.0)
    return family


def _le(bound: float) -> str:
    return f"{bound:g}" if bound != int(bound) else f"{int(bound)}.0"


def _redis_families(devices: list[tuple]) -> Iterator[Any]:
    up = GaugeMetricFamily("tiiny_hub_redis_up", "1 when Redis answered this scrape.")
    errors = CounterMetricFamily(
        "tiiny_hub_device_request_errors",
        "Failed device requests by device and typed error (devices.errors), from every process.",
        labels=["device", "kind"],
    )
    sockets = GaugeMetricFamily(
        "tiiny_hub_websocket_connections", "Open websockets, summed over the web processes that are alive."
    )
    heartbeat = GaugeMetricFamily(
        "tiiny_hub_worker_heartbeat_age_seconds",
        "Seconds since the newest Celery worker heartbeat (+Inf when no worker ever reported).",
    )
    now = time.time()
    client = _redis()
    try:
        pipe = client.pipeline(transaction=False)
        pipe.hgetall(DEVICE_ERRORS_KEY)
        pipe.hgetall(WS_COUNTS_KEY)
        pipe.zrange(WS_SEEN_KEY, 0, -1, withscores=True)
        pipe.zrange(WORKER_HEARTBEAT_KEY, -1, -1, withscores=True)
        error_counts, ws_counts, ws_seen, newest = pipe.execute()
    except redis.RedisError as exc:
        log.warning("metrics without Redis: %s", exc)
        up.add_metric([], 0)
        yield from (up, errors, sockets, heartbeat)
        return
    up.add_metric([], 1)

    # The client knows only its URL; the device rows name it. Several rows on one URL: the first one.
    by_url: dict[str, str] = {}
    for _, name, _, base_url, *_ in devices:
        by_url.setdefault(base_url.rstrip("/"), name)
    totals: dict[tuple[str, str], int] = {}
    for field, count in error_counts.items():
        url, _, kind = field.decode().rpartition("\t")
        key = (by_url.get(url.rstrip("/"), UNREGISTERED), kind)
        totals[key] = totals.get(key, 0) + int(count)
    for (device, kind), count in sorted(totals.items()):
        errors.add_metric([device, kind], count)

    alive = {proc for proc, seen in ws_seen if now - seen <= WS_STALE_S}
    sockets.add_metric([], sum(max(0, int(n)) for proc, n in ws_counts.items() if proc in alive))
    dead = [proc for proc, _ in ws_seen if proc not in alive]
    if dead:  # tidy up after processes that died; harmless if two scrapes do it at once
        try:
            client.pipeline(transaction=False).hdel(WS_COUNTS_KEY, *dead).zrem(WS_SEEN_KEY, *dead).execute()
        except redis.RedisError:
            pass

    heartbeat.add_metric([], max(0.0, now - newest[0][1]) if newest else math.inf)
    yield from (up, errors, sockets, heartbeat)


def _backup_families() -> Iterator[GaugeMetricFamily]:
    """The hub's version, and its last backup (backups/): when, whether it worked, how big (one query each)."""
    info = GaugeMetricFamily(
        "tiiny_hub_version_info", "The hub's version and commit.", labels=["version", "commit"]
    )
    info.add_metric([__version__, commit()], 1)
    yield info
    run, good = last_runs()
    last = GaugeMetricFamily(
        "tiiny_hub_backup_last_run_timestamp_seconds",
        "When the last backup finished, well or not (0: never).",
    )
    last.add_metric([], run.finished.timestamp() if run else 0)
    ok = GaugeMetricFamily(
        "tiiny_hub_backup_last_ok", "1 if the last backup worked, 0 if it failed or none ran."
    )
    ok.add_metric([], 1 if run and run.ok else 0)
    success = GaugeMetricFamily(
        "tiiny_hub_backup_last_success_timestamp_seconds", "When the last good backup finished (0: never)."
    )
    success.add_metric([], good.finished.timestamp() if good else 0)
    size = GaugeMetricFamily("tiiny_hub_backup_last_size_bytes", "What the last good backup holds, in bytes.")
    size.add_metric([], good.size_bytes if good else 0)
    files = GaugeMetricFamily(
        "tiiny_hub_backup_last_files",
        "Result files in the last good backup, by how they got there.",
        labels=["how"],
    )
    files.add_metric(["copied"], good.copied if good else 0)
    files.add_metric(["linked"], good.linked if good else 0)
    yield from (last, ok, success, size, files)


REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(HubCollector())
ProcessCollector(registry=REGISTRY)  # process_*: the web process that answered this scrape


# --- free space under the data folder (hub.disk) ---------------------------------------------------------------
class DiskCollector(Collector):
    """Free and total bytes of the disk holding the results, and the floor below which renders are refused."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            space = disk.disk_space()
        except OSError:
            log.warning("cannot read the free space under %s", disk.watched_folder(), exc_info=True)
            return
        for name, text, value in (
            (
                "tiiny_hub_disk_free_bytes",
                "Free bytes on the disk holding the results (MEDIA_ROOT).",
                space.free,
            ),
            ("tiiny_hub_disk_total_bytes", "Size of the disk holding the results.", space.total),
            (
                "tiiny_hub_disk_min_free_bytes",
                "HUB_MIN_FREE_MB in bytes: below it new renders are refused (0: off).",
                space.minimum,
            ),
        ):
            family = GaugeMetricFamily(name, text)
            family.add_metric([], value)
            yield family


REGISTRY.register(DiskCollector())


# --- access and the view --------------------------------------------------------------------------------
# A reverse proxy on this machine makes every client look like 127.0.0.1: a forwarded request never passes
# on its address alone (a client adding such a header to itself only loses the address pass).
_FORWARDED_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")
FORBIDDEN_TEXT = (
    "403 Forbidden: /metrics answers the addresses in HUB_METRICS_ALLOW and admin API tokens "
    "(Authorization: Bearer thub_...).\n"
)


@functools.cache
def _networks(allow: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(item, strict=False) for item in allow)


def address_allowed(request: HttpRequest) -> bool:
    if any(request.META.get(header) for header in _FORWARDED_HEADERS):
        return False
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", "").strip())
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in net for net in _networks(tuple(settings.HUB_METRICS_ALLOW)))


def _admin_token(request: HttpRequest) -> bool:
    scheme, _, raw = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        return False
    try:
        token = token_authenticate(raw, ip=request.META.get("REMOTE_ADDR"))
    except TokenInvalid:
        return False
    return token.user.is_admin


def may_read(request: HttpRequest) -> bool:
    if address_allowed(request):
        return True
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and user.is_admin:
        return True  # an admin looking in the browser
    return _admin_token(request)


@login_not_required
@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not may_read(request):
        return HttpResponse(FORBIDDEN_TEXT, status=403, content_type="text/plain; charset=utf-8")
    try:
        body = generate_latest(REGISTRY)
    except DatabaseError as exc:
        log.warning("metrics: database unavailable: %s", exc)
        return HttpResponse("503: the database is unavailable\n", status=503, content_type="text/plain")
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
