"""What /healthz reports: each part ``ok`` or the failure, in plain words; and the admins' status page."""

from __future__ import annotations

import datetime as dt
import functools
import ipaddress
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import redis
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import connection
from django.db.models import Count, Q
from django.utils import timezone

from backups.services import last_runs
from devices.models import Device
from hub import atrest, disk, media_storage
from hub.celery import BEAT_TICK_KEY, WORKER_HEARTBEAT_KEY
from hub.version import __version__, commit
from jobs.models import ACTIVE_STATES, WAITING_STATES, Job

WORKER_STALE_S = 30.0
BEAT_STALE_S = 30.0


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    data: dict = field(default_factory=dict)  # numbers for machines (/healthz details), beside the words

    def as_json(self) -> dict:
        return {"status": "ok" if self.ok else "failing", "detail": self.detail, **self.data}


def _redis_client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=0.5, socket_timeout=1)


def check_database() -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure is the answer
        return Check("database", False, f"{type(exc).__name__}: {exc}")
    return Check("database", True, connection.vendor)


def check_redis(client: redis.Redis) -> Check:
    warning = redis_url_warning(settings.REDIS_URL)
    try:
        client.ping()
    except Exception as exc:  # noqa: BLE001
        return Check("redis", False, f"unreachable: {exc}{warning}")
    return Check("redis", True, f"ping ok{warning}")


def redis_url_warning(url: str) -> str:
    """Words for the status page when REDIS_URL names a Redis on another machine without a password: anyone who
    reaches it there can queue work for the hub's worker and write what its pages read. Loopback and a Unix
    socket are this machine's own business (the private Redis of make up has a password anyway)."""
    parts = urlsplit(url)
    if parts.scheme == "unix" or parts.password or not parts.hostname or parts.hostname == "localhost":
        return ""
    try:
        if ipaddress.ip_address(parts.hostname).is_loopback:
            return ""
    except ValueError:
        pass  # a host name: another machine
    return (
        f". Warning: no password for the Redis at {parts.hostname}: anyone who reaches it can queue work for the "
        "hub. Set one (requirepass) and put it in REDIS_URL: redis://:PASSWORD@host:port/0"
    )


def check_worker(client: redis.Redis, now: float) -> Check:
    try:
        newest = client.zrange(WORKER_HEARTBEAT_KEY, -1, -1, withscores=True)
    except Exception:  # noqa: BLE001
        return Check("worker", False, "unknown (Redis unreachable)")
    if not newest:
        return Check("worker", False, "no worker has ever reported a heartbeat")
    age = now - newest[0][1]
    if age > WORKER_STALE_S:
        return Check("worker", False, f"last heartbeat {age:.0f} s ago")
    return Check("worker", True, f"heartbeat {age:.1f} s ago")


def check_beat(client: redis.Redis, now: float) -> Check:
    try:
        raw = client.get(BEAT_TICK_KEY)
    except Exception:  # noqa: BLE001
        return Check("beat", False, "unknown (Redis unreachable)")
    if raw is None:
        return Check("beat", False, "beat has not ticked")
    age = now - float(raw)
    if age > BEAT_STALE_S:
        return Check("beat", False, f"last tick {age:.0f} s ago")
    return Check("beat", True, f"tick {age:.1f} s ago")


# -- free space under the data folder (hub.disk) -------------------------------------------------------------
def check_disk() -> Check:
    """Free space where the results go: failing below ``HUB_MIN_FREE_MB`` (new renders are refused then)."""
    try:
        space = disk.disk_space()
    except OSError as exc:
        return Check("disk", False, f"cannot read the free space of {disk.watched_folder()}: {exc}")
    floor = (
        f"new renders are refused below {space.minimum_text}"
        if space.minimum
        else "no floor (HUB_MIN_FREE_MB=0)"
    )
    detail = f"{space.free_text} free of {disk.size_text(space.total)} under {space.path}; {floor}"
    if space.low:
        detail += ". Delete old results on the Usage page, or free space on this machine"
    data = {
        "free_bytes": space.free,
        "total_bytes": space.total,
        "min_free_bytes": space.minimum,
        "path": str(space.path),
    }
    return Check("disk", not space.low, detail, data)


# -- the result store (hub.media_storage): the local folder, or an S3 bucket -------------------------------------
def check_store() -> Check:
    """Where results, inputs and thumbnails go: the local folder (its room is the disk check's), or a bucket that
    must answer a HEAD within about a second."""
    ok, detail = media_storage.probe(default_storage)
    return Check("store", ok, detail, {"remote": bool(getattr(default_storage, "bucket_name", None))})


def run_checks() -> list[Check]:
    client = _redis_client()
    now = time.time()
    try:
        checks = [check_database(), check_redis(client), check_worker(client, now), check_beat(client, now)]
    finally:
        client.close()
    checks.append(check_disk())
    checks.append(check_store())
    return checks


def redis_ok() -> bool:
    """Cheap probe for the page banner (sub-millisecond when Redis is up, 0.5 s worst case)."""
    try:
        return bool(_probe_client(settings.REDIS_URL).ping())
    except Exception:  # noqa: BLE001
        return False


@functools.lru_cache(maxsize=4)
def _probe_client(url: str) -> redis.Redis:
    """The banner probe's client, one per URL: its pool keeps the connection from one page to the next (a new
    connection on every page was most of the probe's ~1 ms). A dropped connection is made again on the next
    probe; redis-py's pool starts afresh in a forked child."""
    return redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=1)


def may_see_details(request) -> bool:
    """Who may read what each check found (addresses, error text, ages): admins, and the allow-list.

    Everyone else learns only "ok" or "failing". The allow-list (HUB_HEALTH_ALLOW, loopback by default)
    is for probes and monitors on the host; a request that came through a proxy (it carries
    X-Forwarded-For, Forwarded or X-Real-IP) never passes by its address alone, since behind a reverse
    proxy every caller seems to come from the proxy's loopback address.
    """
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and getattr(user, "is_admin", False):
        return True
    if any(h in request.headers for h in ("X-Forwarded-For", "Forwarded", "X-Real-IP")):
        return False
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR") or "")
    except ValueError:
        return False
    if address.version == 6 and address.ipv4_mapped:  # a dual-stack socket's "::ffff:127.0.0.1"
        address = address.ipv4_mapped
    return any(address in net for net in allowed_networks())


def allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(n, strict=False) for n in settings.HUB_HEALTH_ALLOW]


# -- the readable status page (admins: /health/) ---------------------------------------------------------------
@dataclass(frozen=True)
class DeviceStatus:
    pk: int
    name: str
    state: str
    state_label: str
    message: str
    last_seen: dt.datetime | None
    reading_at: dt.datetime | None
    waiting: int  # queued or scheduled
    running: int  # preparing, submitted, running or collecting
    paused: bool
    is_default: bool
    round_trip: str = ""  # the link's p95 ("40 ms"), measured by the poller
    slow_link: bool = False


def device_statuses() -> list[DeviceStatus]:
    """Every device with its state and its queue (two queries; the default device first)."""
    counts = {
        row["device_id"]: row
        for row in Job.objects.filter(state__in=[*WAITING_STATES, *ACTIVE_STATES])
        .order_by()
        .values("device_id")
        .annotate(
            waiting=Count("pk", filter=Q(state__in=WAITING_STATES)),
            running=Count("pk", filter=Q(state__in=ACTIVE_STATES)),
        )
    }
    devices = Device.objects.only(
        "pk",
        "name",
        "state",
        "state_message",
        "last_seen",
        "reading_at",
        "queue_paused",
        "is_default",
        "link_p95_ms",
    ).order_by("-is_default", "name")
    return [
        DeviceStatus(
            pk=d.pk,
            name=d.name,
            state=d.state,
            state_label=d.get_state_display(),
            message=d.state_message,
            last_seen=d.last_seen,
            reading_at=d.reading_at,
            waiting=counts.get(d.pk, {}).get("waiting", 0),
            running=counts.get(d.pk, {}).get("running", 0),
            paused=d.queue_paused,
            is_default=d.is_default,
            round_trip=d.round_trip_text,
            slow_link=d.slow_link_s is not None,
        )
        for d in devices
    ]


CHECK_LABELS = {
    "database": "Database",
    "redis": "Redis (queue, live updates)",
    "worker": "Worker heartbeat",
    "beat": "Beat tick (repair sweep, device polls)",
    "disk": "Free disk space (results, uploads)",
    "store": "Result store (results, inputs, thumbnails)",
}


def status_report() -> dict:
    """What the admins' status page shows: the /healthz checks in words, the devices and the queue depth."""
    checks = run_checks()
    try:
        devices = device_statuses()
    except Exception as exc:  # noqa: BLE001 - the database check above already names the failure
        devices, devices_error = [], f"{type(exc).__name__}: {exc}"
    else:
        devices_error = ""
    return {
        "backup": backup_status(),
        "version": version_details(),
        "checks": [
            {"name": c.name, "label": CHECK_LABELS.get(c.name, c.name), "ok": c.ok, "detail": c.detail}
            for c in checks
        ],
        "healthy": all(c.ok for c in checks),
        "devices": devices,
        "devices_error": devices_error,
        "queue_depth": sum(d.waiting for d in devices),
        "running": sum(d.running for d in devices),
        "checked_at": timezone.now(),
        **disk_report(),
        "files_open": files_open(),
    }


# -- the version and the last backup: details for /healthz and the status page, never a failing check -----------
def version_details() -> dict:
    return {"version": __version__, "commit": commit() or None}


def backup_status() -> dict:
    """The newest backup run (time, size, result) and the newest good one; ``configured`` says whether beat takes
    one daily (HUB_BACKUP_DIR). A failed or missing backup is shown, but the hub still serves: not a check."""
    try:
        run, good = last_runs()
    except Exception as exc:  # noqa: BLE001 - the database check names the failure
        return {"configured": bool(settings.HUB_BACKUP_DIR), "error": f"{type(exc).__name__}: {exc}"}
    return {
        "configured": bool(settings.HUB_BACKUP_DIR),
        "directory": settings.HUB_BACKUP_DIR or None,
        "at": "{:02d}:{:02d}".format(*settings.HUB_BACKUP_AT),
        "last": _run_json(run),
        "last_ok": _run_json(good),
    }


def _run_json(run) -> dict | None:
    if run is None:
        return None
    return {
        "name": run.name,
        "finished": run.finished,  # JsonResponse writes it in ISO 8601
        "ok": run.ok,
        "size_bytes": run.size_bytes,
        "files": run.files,
        "copied": run.copied,
        "linked": run.linked,
        "error": run.error,
        "trigger": run.trigger,
    }


def healthz_details() -> dict:
    """What /healthz adds to its checks for those who may read details."""
    return {"version": version_details(), "backup": backup_status()}


def files_open() -> str:
    """The status page's warning when other users of the machine may read the hub's files (hub.atrest), else ""."""
    return atrest.opened_up_warning(Path(settings.DATA_DIR))


def disk_report() -> dict:
    """The status page's disk block: the free space, the floor, and whether results wait for space."""
    try:
        space = disk.disk_space()
    except OSError:
        return {"disk": None}
    return {"disk": space, "disk_total": disk.size_text(space.total)}
