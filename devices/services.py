"""Every change to a Device goes through here (views, tasks, commands and the job engine are ways in).

Network I/O (device calls) always happens *outside* a transaction: call the device first, then write the
outcome in one short UPDATE.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache
from django.db import close_old_connections, connection, transaction
from django.db.models import Q
from django.utils import timezone

from devices import crypto, errors, hooks
from devices.beliefs import device_note_loaded as device_note_loaded  # the job runners' door
from devices.beliefs import device_note_unloaded as device_note_unloaded
from devices.beliefs import device_save_capabilities as device_save_capabilities
from devices.beliefs import reconcile_from_reading
from devices.capabilities import Capabilities
from devices.clients import CLIENTS, TensorSharpClient, TiinyClient
from devices.clients.base import validate_base_url
from devices.clients.tiiny import Reading, RunningModels
from devices.clients.tiiny_answers import replaced
from devices.crypto import KeyUnreadable
from devices.loads import device_load_seconds, device_note_load_seconds
from devices.metrics import Sample, metric_add
from devices.models import Device
from devices.registry import (
    NAME_TAKEN as NAME_TAKEN,  # adding, changing and removing devices: devices.registry
)
from devices.registry import device_register as device_register
from devices.registry import device_remove as device_remove
from devices.registry import device_update as device_update
from devices.round_trips import device_note_round_trips
from devices.silence import LinkGate
from hub import pagecache

logger = logging.getLogger("devices")

CAPABILITIES_MAX_AGE = dt.timedelta(minutes=5)
POLL_FAST = dt.timedelta(seconds=2)
POLL_BUSY = dt.timedelta(seconds=10)  # a job runs, nobody watches: one point per chart bucket
POLL_SLOW = dt.timedelta(seconds=30)
#: A poller's claim on its device lapses this soon unless its holder renews it (``device_poll_claim`` renews it
#: every third of it while the poll lasts): a worker killed mid-poll holds the device's poller off for at most
#: this long. (It was 35 s, longer than the poll's hard time limit; a queue then idled that long on a device the
#: hub still thought unreachable.) Longer than one probe's own timeout, so a renewal missed under load is no race.
POLL_CLAIM = dt.timedelta(seconds=6)

FIX_LOCKED = (
    "Run `tiiny login` on a computer signed in to TiinyOS, or open the TiinyOS desktop app; "
    "either unlocks it within seconds. TiinyOS “Auto Start” avoids this after a power cycle."
)
FIX_UNREACHABLE = "Check that the device is switched on and on this network, and that its URL is right."
FIX_AUTH = "An admin should enter the API key TiinyOS shows for this device (Devices → Edit)."


@dataclass
class ConnectionReport:
    """What a connection test found; ``human`` + ``fix`` are shown as is, ``detail`` is the device's words."""

    ok: bool
    state: str
    human: str
    fix: str = ""
    detail: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    models: int = 0
    loaded: list[str] = field(default_factory=list)


# -- state -------------------------------------------------------------------------------------------------


def state_for_error(exc: errors.DeviceError) -> tuple[str, str, str]:
    """(state, human message, fix) for a failed call; the state is ``""`` when it says nothing about it.

    The message and the fix are for everyone who watches the device, so they never name its address:
    admins see that beside them (``Device.state_detail``), members and viewers don't.
    """
    if isinstance(exc, errors.DeviceLocked):
        return (
            Device.State.LOCKED,
            "Locked after a restart: every call answers 502 until it is unlocked.",
            FIX_LOCKED,
        )
    if isinstance(exc, errors.DeviceUnreachable):
        return Device.State.UNREACHABLE, exc.human, FIX_UNREACHABLE
    if isinstance(exc, errors.AuthFailed):
        return Device.State.AUTH_FAILED, exc.human, FIX_AUTH
    return "", f"{exc.human}" + (f": {exc.detail}" if exc.detail else ""), ""


def device_set_state(
    *,
    device_id: int,
    state: str,
    message: str = "",
    fix: str = "",
    seen: bool = False,
    as_of: dt.datetime | None = None,
) -> bool:
    """Record the state; returns True when it changed (the caller then refreshes capabilities, pushes...).

    ``as_of``: when the request that tells the state was sent. What it tells is stale if the state changed since
    (a reading sent just before the device went away, answered, and written after a job's request had found it
    unreachable), and then nothing is written: the newer word stands."""
    now = timezone.now()
    changes: dict[str, Any] = {"state_message": message[:500], "state_fix": fix[:500]}
    if seen:
        changes["last_seen"] = now
    rows = Device.objects.filter(pk=device_id)
    if as_of is not None:
        rows = rows.filter(Q(state_changed_at__isnull=True) | Q(state_changed_at__lte=as_of))
    if state == Device.State.LOCKED:
        # A lock comes with a restart (every call 502 until unlocked): what the hub had loaded is gone, and a model
        # loaded after it is whoever loaded it's, which polite mode spares.
        changes |= {"hub_loaded_models": [], "hub_loaded_instances": {}}
    changed = rows.exclude(state=state).update(state=state, state_changed_at=now, **changes)
    if not changed:
        rows.update(**{k: v for k, v in changes.items() if not k.startswith("hub_loaded")})
        return False
    transaction.on_commit(pagecache.changed)  # pages show the state beside the live card (hub.pagecache)
    # Whoever registered to hear of it, after commit (jobs: the pool's jobs move; notify: the household hears of a
    # lock); a hook's error never raises here. A lambda, not a partial: Django logs a robust callback's error by
    # the callback's __qualname__.
    for hook in hooks.device_state_hooks():
        transaction.on_commit(lambda hook=hook: hook(device_id=device_id, state=state), robust=True)
    for hook in hooks.device_locked_hooks() if state == Device.State.LOCKED else ():
        transaction.on_commit(lambda hook=hook: hook(device_id=device_id, since=now), robust=True)
    return True


def device_note_running(
    *,
    device_id: int,
    state: RunningModels,
    loaded: str | None = None,
    unloaded: list[str] | tuple[str, ...] = (),
) -> None:
    """The hub just read the device's running list: keep its own list true to it, and show it.

    A model the hub loaded that the device no longer runs (a power cycle, a slow stop that unloaded everything),
    or runs as another instance (another port or launch time: it was loaded again since, by a restart or someone
    else) is no longer the hub's: polite mode must leave it alone. ``loaded`` is the model the hub itself just
    launched (its instance is noted); ``unloaded`` those it just stopped.
    """
    present = set(state.running) | set(state.pending)
    # The units in use, when the list names what each model takes (the budget counts loading models too).
    units = sum(state.usage[m] for m in present) if present <= set(state.usage) else None
    with transaction.atomic():
        device = Device.objects.select_for_update().get(pk=device_id)
        noted = device.hub_loaded_instances or {}
        mine = [
            m
            for m in device.hub_loaded_models
            if m in present and m not in unloaded and not replaced(noted.get(m), state.instances.get(m))
        ]
        if loaded and loaded in present and loaded not in mine:
            mine.append(loaded)
        marks = {m: noted[m] for m in mine if m in noted and m != loaded}
        marks |= {m: state.instances[m] for m in mine if m not in marks and m in state.instances}
        device.hub_loaded_models, device.hub_loaded_instances = mine, marks
        device.loaded_models = state.loaded_rows()
        fields = ["hub_loaded_models", "hub_loaded_instances", "loaded_models", "updated"]
        before = device.npu_units_used
        if units is not None and before is not None and device.npu_units_total is not None:
            device.npu_units_used = units
            fields.append("npu_units_used")
        device.save(update_fields=fields)
    if "npu_units_used" in fields:
        _note_units(device, before, units)


def device_mark_active(*, device_id: int, until: dt.datetime) -> None:
    """A job runs on the device until ``until`` (renewed while it works). The poller's next look moves to the next
    beat only when the device was not active yet: a renewal at every render poll must not turn the busy rhythm
    into a read per beat."""
    now = timezone.now()
    started = (
        Device.objects.filter(pk=device_id)
        .filter(Q(active_until__isnull=True) | Q(active_until__lte=now))
        .update(active_until=until, next_poll_at=None)
    )
    if not started:
        Device.objects.filter(pk=device_id).update(active_until=until)


def device_set_queue_paused(*, device_id: int, paused: bool) -> None:
    Device.objects.filter(pk=device_id).update(queue_paused=paused)


# -- readings ----------------------------------------------------------------------------------------------


def device_record_reading(*, device_id: int, reading: Reading, at: dt.datetime | None = None) -> None:
    at = at or timezone.now()
    fields: dict[str, Any] = {}
    if reading.full:  # a status-only sample keeps the units and the loaded list of the last full one
        fields = {
            "npu_units_used": reading.npu_units_used,
            "npu_units_total": reading.npu_units_total,
            "loaded_models": reading.models,
        }
    Device.objects.filter(pk=device_id).update(
        npu_util=reading.npu_util,
        npu_mem_used_mb=reading.npu_mem_used_mb,
        npu_mem_total_mb=reading.npu_mem_total_mb,
        cpu_percent=reading.cpu_percent,
        mem_percent=reading.mem_percent,
        reading_at=at,
        last_seen=at,
        **fields,
    )
    if reading.full:
        reconcile_from_reading(device_id=device_id, reading=reading)
    mem_pct = (
        100.0 * reading.npu_mem_used_mb / reading.npu_mem_total_mb
        if reading.npu_mem_used_mb is not None and reading.npu_mem_total_mb
        else None
    )
    metric_add(
        device_id=device_id,
        sample=Sample(reading.npu_util, mem_pct, reading.cpu_percent, reading.mem_percent),
        at=at,
    )


# -- talking to the device (never inside a transaction) ----------------------------------------------------


def client_for(device: Any, *, note_asked: bool = True, **kw: Any) -> TiinyClient | TensorSharpClient:
    """The right client for a ``Device`` row (by ``device.kind``), for the metric poller and the job engine alike.

    The client is handed what it tells the hub (it never imports the services): with ``note_asked``, every
    request it sends is noted (``device_note_asked``), so the metric poller's optional tick gives way to it (the
    poller's own client passes False); a Tiiny client also learns each model's load time (``device_load_seconds``,
    read only when a load needs it: most job steps load nothing) and reports each load it launched.
    """
    client = CLIENTS[device.kind].for_device(device, **kw)
    if getattr(device, "pk", None) is None:
        return client
    client.link = LinkGate(device.pk, device.base_url)  # a silent device: once per window (devices.silence)
    if note_asked:
        client.on_request = functools.partial(device_note_asked, device.pk)
    if isinstance(client, TiinyClient):
        client.expect_load_seconds(functools.partial(device_load_seconds, device))
        client.on_loaded = functools.partial(device_note_load_seconds, device.pk)
    return client


#: A full reading (NPU units and the loaded list, a second request) at least this often; between them only
#: ``sys/status`` is read, unless its NPU memory moved by more than ``FULL_ON_MEM_CHANGE`` of the total beyond
#: what the loads and unloads the hub's own jobs saw since would move it (a load or an unload nobody in the hub
#: read the list after), or the device just came back.
FULL_READING_EVERY = dt.timedelta(seconds=60)
FULL_ON_MEM_CHANGE = 0.05


def _full_key(device_id: int) -> str:
    return f"devices:full-reading:{device_id}"


def _full_due(device: Device, reading: Reading) -> bool:
    if device.state != Device.State.ONLINE or not device.reading_at or device.npu_mem_used_mb is None:
        return True
    try:
        last = cache.get(_full_key(device.pk))
    except Exception:  # noqa: BLE001 - no cache: read everything, as before
        return True
    if last is None or timezone.now().timestamp() - float(last) > FULL_READING_EVERY.total_seconds():
        return True
    total = reading.npu_mem_total_mb or device.npu_mem_total_mb
    if reading.npu_mem_used_mb is None or not total:
        return True
    # Units are a share of the NPU memory: what the hub's own jobs saw loaded since the last reading
    # (``device_note_running``) says how far it should have moved; only a move beyond that is news.
    expected = _units_moved_since(device) * total / 100.0
    return abs(reading.npu_mem_used_mb - device.npu_mem_used_mb - expected) > FULL_ON_MEM_CHANGE * total


def _units_key(device_id: int) -> str:
    return f"devices:units-noted:{device_id}"


def _note_units(device: Device, before: int, after: int) -> None:
    """A job of the hub read the loaded list (and so the units) after a load or an unload: keep how the units
    moved since the device's last reading (from the first such note after it), for ``_full_due``."""
    now = timezone.now().timestamp()
    read = device.reading_at.timestamp() if device.reading_at else 0.0
    try:
        noted = cache.get(_units_key(device.pk))
        if isinstance(noted, dict) and float(noted.get("at", 0)) > read:
            before = int(noted["from"])  # an earlier note since that reading moved them first
        cache.set(_units_key(device.pk), {"at": now, "from": before, "to": after}, timeout=3600)
    except Exception:  # noqa: BLE001 - no cache: the poller reads the units itself, as before
        pass


def _units_moved_since(device: Device) -> float:
    """Units the hub's own jobs saw loaded (or unloaded, negative) since the device's last reading."""
    try:
        noted = cache.get(_units_key(device.pk))
        if not isinstance(noted, dict) or not device.reading_at:
            return 0.0
        if float(noted.get("at", 0)) <= device.reading_at.timestamp():
            return 0.0
        return float(noted["to"]) - float(noted["from"])
    except Exception:  # noqa: BLE001
        return 0.0


def _note_full(device_id: int) -> None:
    try:
        cache.set(_full_key(device_id), timezone.now().timestamp(), timeout=3600)
    except Exception:  # noqa: BLE001
        pass


def _reading_for(client: TiinyClient | TensorSharpClient, device: Device | None = None) -> Reading:
    """One request per tick (Tiiny: ``sys/status``, a second only when the loaded models may have changed;
    TensorSharp: ``/api/models``)."""
    if isinstance(client, TiinyClient):
        if device is None:
            return client.reading()
        reading = client.reading(full=False)
        if _full_due(device, reading):
            reading = client.with_units(reading)
            _note_full(device.pk)
        return reading
    models = client.models()  # answering at all is the liveness /health would prove: one request per tick
    loaded = models.get("loaded")
    return Reading(models=[{"model_id": loaded, "npu_usage": None, "status": "running"}] if loaded else [])


def _capabilities_due(device: Device, reading: Reading, became_online: bool) -> bool:
    if became_online or not device.capabilities_at:
        return True
    if timezone.now() - device.capabilities_at > CAPABILITIES_MAX_AGE:
        return True
    if not reading.full:
        return False
    # What is loaded changed: video options are only readable for a loaded model.
    before = {m.get("model_id") for m in device.loaded_models or []}
    return before != {m.get("model_id") for m in reading.models}


def device_refresh(*, device_id: int, client: TiinyClient | TensorSharpClient | None = None) -> str:
    """Poll the device once: reading → state → capabilities when due. Returns the resulting state.

    The caller (``tasks.poll_device``) holds the per-device claim; this function does the I/O and the writes.
    """
    device = Device.objects.get(pk=device_id)
    try:
        client = client or client_for(device, note_asked=False)
    except KeyUnreadable as exc:  # the secret was rotated without keeping the old one as a fallback
        device_set_state(device_id=device_id, state=Device.State.AUTH_FAILED, message=str(exc), fix=FIX_AUTH)
        return Device.State.AUTH_FAILED
    asked_at = (
        timezone.now()
    )  # a job's request may tell the state meanwhile: a stale reading must not undo it
    try:
        reading = _reading_for(client, device)
    except errors.DeviceError as exc:
        state, message, fix = state_for_error(exc)
        if state:
            device_set_state(device_id=device_id, state=state, message=message, fix=fix, as_of=asked_at)
        else:
            logger.info("device %s poll failed: %s", device_id, exc.human)
            device_set_state(
                device_id=device_id, state=device.state, message=message, fix=fix, as_of=asked_at
            )
        return state or device.state
    # "Online" means usable: a device coming online (or still without capabilities) has them read first, and
    # stays as it was when they can't be; the old ones stand until new ones replace them, never a gap with none.
    coming = device.state != Device.State.ONLINE or not device.capabilities
    if coming or _capabilities_due(device, reading, False):
        failed = device_read_capabilities(device=device, client=client)
        if failed is not None and coming:
            state, message, fix = state_for_error(failed)
            device_set_state(
                device_id=device_id, state=state or device.state, message=message, fix=fix, as_of=asked_at
            )
            return state or device.state
    device_set_state(device_id=device_id, state=Device.State.ONLINE, seen=True, as_of=asked_at)
    device_record_reading(device_id=device_id, reading=reading)
    device_note_round_trips(device_id=device_id, seconds=client.round_trips)
    return Device.State.ONLINE


def device_read_capabilities(
    *, device: Device, client: TiinyClient | TensorSharpClient | None = None
) -> errors.DeviceError | None:
    """Read what the device can do and store it (replacing the last, in one write). Returns the error when it
    could not be read (the last capabilities then stand)."""
    previous = Capabilities.from_dict(device.capabilities) if device.capabilities else None
    try:
        if client is None:
            with client_for(device, note_asked=False) as own:
                caps = own.capabilities(previous=previous)
        else:
            caps = client.capabilities(previous=previous)
    except errors.DeviceError as exc:
        logger.info("device %s capabilities failed: %s", device.pk, exc.human)
        return exc
    device_save_capabilities(device_id=device.pk, caps=caps)
    return None


def device_test_connection(
    *, kind: str, base_url: str, api_key: str = "", transport: Any = None
) -> ConnectionReport:
    """Try the device as configured (nothing is saved). Says exactly what failed."""
    try:
        url = validate_base_url(base_url)
    except ValueError as exc:
        return ConnectionReport(False, Device.State.UNKNOWN, str(exc))
    try:
        if kind == Device.Kind.TENSORSHARP:
            with TensorSharpClient(url, transport=transport) as ts:
                ts.health()
                m = ts.models()
                loaded = [m["loaded"]] if m.get("loaded") else []
                return ConnectionReport(
                    True,
                    Device.State.ONLINE,
                    "Connected.",
                    models=len(m.get("models") or []),
                    loaded=loaded,
                    versions={"architecture": str(m.get("architecture") or "")},
                )
        with TiinyClient(url, api_key, transport=transport) as tiiny:
            info = tiiny.device_info()
            # device_info may be served without a key (field notes §1.3): prove the key on a guarded route.
            rows = tiiny.models()
            running = tiiny.running().running
    except errors.DeviceError as exc:
        state, message, fix = state_for_error(exc)
        return ConnectionReport(False, state or Device.State.UNKNOWN, message, fix=fix, detail=exc.detail)
    versions = {k: str(info[k]) for k in ("tiiny_os", "version", "device_name") if info.get(k)}
    return ConnectionReport(
        True, Device.State.ONLINE, "Connected.", versions=versions, models=len(rows), loaded=running
    )


def device_check_now(*, device: Device) -> ConnectionReport:
    """The admin's "Test connection" on a saved device: test, then record the state it found."""
    try:
        key = device.api_key
    except KeyUnreadable as exc:  # show it rather than a 500
        return ConnectionReport(False, Device.State.AUTH_FAILED, str(exc), fix=FIX_AUTH)
    report = device_test_connection(kind=device.kind, base_url=device.base_url, api_key=key)
    if report.ok and (failed := device_read_capabilities(device=device)) is not None:
        # Usable the moment it is added: "online" only with its models read (a job sent right after must find them).
        state, message, fix = state_for_error(failed)
        report = ConnectionReport(
            False,
            state or Device.State.UNKNOWN,
            f"Connected, but reading its models failed: {message}",
            fix=fix,
            detail=failed.detail,
        )
    if report.state != Device.State.UNKNOWN:
        device_set_state(
            device_id=device.pk,
            state=report.state,
            message="" if report.ok else report.human,
            fix=report.fix,
            seen=report.ok,
        )
        Device.objects.filter(pk=device.pk).update(next_poll_at=None)  # refresh readings and caps now
    return report


# -- polling bookkeeping -----------------------------------------------------------------------------------


def device_poll_interval(*, device: Device, watched: bool, now: dt.datetime) -> dt.timedelta:
    """Fast while someone watches, or while a job waits for the device to come back (the poller is what notices
    it); a job on a working device is followed by its own polls, so the metrics then keep the busy rhythm."""
    busy = device.active_until is not None and device.active_until > now
    if watched or (busy and device.state != Device.State.ONLINE):
        return POLL_FAST
    return POLL_BUSY if busy else POLL_SLOW


#: The watched tick (``POLL_FAST``) is optional; the job's own requests are not. The tick gives way when the job
#: asked the device within ``YIELD_WINDOW`` or will within it (its next poll is due), so the two never add up:
#: a render polled densely near its end costs its polls and no ticks, and one polled every few seconds far from
#: it costs them and no ticks between (two beats either side of each poll: with one, a render polled every 5 s
#: cost a tick in each gap, and its polls saved nothing). The gauges are still read at least every
#: ``POLL_BUSY`` (they may then lag by up to that while a render is polled; the card says when they were read).
YIELD_WINDOW = 2 * POLL_FAST


def _asked_key(device_id: int) -> str:
    return f"devices:asked:{device_id}"


def device_note_asked(device_id: int) -> None:
    """The job path just sent a request to the device (``devices.clients``' hook; never raises)."""
    try:
        cache.set(_asked_key(device_id), timezone.now().timestamp(), timeout=600)
    except Exception:  # noqa: BLE001 - no cache: the tick just does not give way
        pass


def device_asked_at(device_id: int) -> dt.datetime | None:
    try:
        at = cache.get(_asked_key(device_id))
    except Exception:  # noqa: BLE001
        return None
    return dt.datetime.fromtimestamp(float(at), tz=dt.UTC) if at is not None else None


def device_tick_yields(*, device: Device, now: dt.datetime) -> bool:
    """Should this status tick give way to the job's own requests (see ``YIELD_WINDOW``)?

    Never while the device is not known to be online (the tick is what notices it back), nor when the last
    reading is ``POLL_BUSY`` old.
    """
    if device.state != Device.State.ONLINE or device.reading_at is None:
        return False
    if now - device.reading_at >= POLL_BUSY:
        return False
    asked = device_asked_at(device.pk)
    if asked is not None and now - asked < YIELD_WINDOW:
        return True
    return hooks.jobs_ask_soon(device, now, YIELD_WINDOW)  # the jobs app knows when its jobs poll


def device_claim_enqueue(*, device: Device, interval: dt.timedelta, now: dt.datetime) -> bool:
    """poll_all's claim: move ``next_poll_at`` forward iff nobody else did (one enqueue per due poll)."""
    return bool(
        Device.objects.filter(pk=device.pk, next_poll_at=device.next_poll_at).update(
            next_poll_at=now + interval
        )
    )


def device_claim_poll(*, device_id: int, now: dt.datetime | None = None) -> dt.datetime | None:
    """poll_device's claim: at most one poller per device at a time, whatever the number of workers.

    Returns the claim (its expiry, which is also the holder's token for ``device_renew_poll`` and
    ``device_release_poll``), or None when another poller holds a live claim.
    """
    now = now or timezone.now()
    until = now + POLL_CLAIM
    taken = (
        Device.objects.filter(pk=device_id)
        .filter(Q(poll_claimed_until__isnull=True) | Q(poll_claimed_until__lt=now))
        .update(poll_claimed_until=until)
    )
    return until if taken else None


def device_renew_poll(*, device_id: int, claim: dt.datetime) -> dt.datetime | None:
    """Extend the claim ``claim`` (only its holder's: a lapsed claim someone else took stays theirs)."""
    until = timezone.now() + POLL_CLAIM
    renewed = Device.objects.filter(pk=device_id, poll_claimed_until=claim).update(poll_claimed_until=until)
    return until if renewed else None


def device_release_poll(*, device_id: int, claim: dt.datetime | None = None) -> None:
    """Free the device for the next poller; with ``claim``, only if that claim still holds it."""
    qs = Device.objects.filter(pk=device_id)
    if claim is not None:
        qs = qs.filter(poll_claimed_until=claim)
    qs.update(poll_claimed_until=None)


@contextmanager
def device_poll_claim(*, device_id: int) -> Iterator[bool]:
    """Hold the device's poll claim for the block (yields False when another poller holds it).

    The claim is short (``POLL_CLAIM``) and a daemon thread renews it while the block runs, so a slow poll (a
    device that answers at its timeouts, a capabilities refresh) keeps it, while a holder that dies (SIGKILL,
    a lost machine) stops renewing and frees the device within ``POLL_CLAIM``.
    """
    claim = device_claim_poll(device_id=device_id)
    if claim is None:
        yield False
        return
    held = {"claim": claim}
    stop = threading.Event()

    def renew() -> None:
        try:
            while not stop.wait(POLL_CLAIM.total_seconds() / 3):
                try:
                    new = device_renew_poll(device_id=device_id, claim=held["claim"])
                except Exception:  # a busy database: try again at the next beat
                    logger.warning("renewing the poll claim on device %s failed", device_id, exc_info=True)
                    continue
                if new is None:
                    logger.warning("device %s: the poll claim lapsed and another poller took it", device_id)
                    return
                held["claim"] = new
        finally:
            close_old_connections()
            connection.close()

    thread = threading.Thread(target=renew, name=f"poll-claim-{device_id}", daemon=True)
    thread.start()
    try:
        yield True
    finally:
        stop.set()
        thread.join(timeout=5)
        device_release_poll(device_id=device_id, claim=held["claim"])


def device_rekey_all() -> int:
    """Re-encrypt every stored key under the current SECRET_KEY (after rotating it; see devices.crypto)."""
    n = 0
    for device in Device.objects.exclude(api_key_encrypted=""):
        Device.objects.filter(pk=device.pk).update(api_key_encrypted=crypto.rotate(device.api_key_encrypted))
        n += 1
    return n
