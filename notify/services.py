"""Notifications: every change to channels and deliveries goes through here.

The flow: transition -> outbox -> pages/pushes/notifications. The jobs outbox (``jobs.live.outbox``, which
``NotifyConfig.ready`` registers ``notify.job_news.jobs_entered`` with) and ``devices.hooks.device_locked`` are the
two ways in:

1. After the job's transition committed, ``notify.job_news.job_entered`` maps the state to an event (done, failed,
   started) and calls :func:`notify_event`, which writes one pending Delivery per channel that wants it and
   enqueues ``notify.tasks.deliver`` after *that* commit. Nothing here runs inside the job's transaction, and
   every exception is caught and logged: a notification can never undo, delay or fail a transition.
2. The task (:func:`delivery_attempt`) claims its row with a conditional UPDATE (pending → sending), sends
   outside any transaction, then records sent, or failed with a reason. A failure that may pass is marked
   ``retrying`` and the next attempt is a new row, enqueued with a countdown (``NOTIFY_RETRY_DELAYS_S``).
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets as _secrets
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from celery import current_app
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from devices.models import Device
from hub.disk import disk_space
from jobs.live.fragments import job_title
from jobs.models import Job
from notify import confirm, crypto, senders, targets
from notify.models import EVENT_FLAGS, HOUSEHOLD_EVENTS, PERSONAL_EVENTS, Channel, Delivery, Event
from notify.retention import expiring_message
from notify.selectors import (
    ChannelRefused,
    channel_silent_reason,
    require_channel_allowed,
    require_household_admin,
)

logger = logging.getLogger("notify")

#: a row left "sending" this long (its worker died mid-send) may be claimed again: ``NOTIFY_CLAIM_STALE_S``
#: a pending row this much past its due time (its countdown included) has lost its task, and the sweep enqueues it:
#: ``NOTIFY_SWEEP_AFTER_S``


def _claim_stale() -> dt.timedelta:
    return dt.timedelta(seconds=settings.NOTIFY_CLAIM_STALE_S)


SWEEP_BATCH = 200
#: job state -> event (job.started: the hub began working on it — the model load counts)
#: "Send a test" checks that a channel arrives; it is not a way to make the hub hammer a URL or an inbox: one test
#: per channel per TEST_COOLDOWN, and at most TEST_PER_HOUR a person over all their channels.
TEST_COOLDOWN = dt.timedelta(seconds=30)
TEST_PER_HOUR = 20


# -- channels ----------------------------------------------------------------------------------------------------
def _mask_url(url: str) -> str:
    """A webhook's ``scheme://host/…``: enough to tell channels apart (with their names), never a path token."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}/…"


def _validate_webhook_url(url: str) -> None:
    try:
        parts = urlsplit(url)
        port = parts.port or (
            443 if parts.scheme == "https" else 80
        )  # .port raises ValueError when out of range
    except ValueError:  # e.g. "http://[::1" (an unclosed IPv6 address)
        raise ValidationError(
            {"url": "This is not a URL the hub can call: check the host and the port."}
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError({"url": "A webhook URL starts with http:// or https:// and names a host."})
    if any(c.isspace() for c in url):
        raise ValidationError({"url": "A URL has no spaces in it (write a space in a path as %20)."})
    _check_target({"url": targets.refusal(parts.hostname, port)})


def _check_target(refusals: dict[str, str | None]) -> None:
    """A channel's target is checked when it is added or changed, and again at every send (``notify.senders``):
    a person learns now that a private address won't be reached, not from a failed delivery."""
    errors = {name: text for name, text in refusals.items() if text}
    if errors:
        raise ValidationError(errors)


def _apprise_settings(url: str) -> tuple[dict, str]:
    target = senders.apprise_target(url) if url else None
    if not target:
        raise ValidationError(
            {"url": "Apprise does not know this URL. It starts with the service, e.g. ntfy://topic, "
             "tgram://bottoken/chatid or discord://webhook_id/webhook_token."}
        )  # fmt: skip
    if target.several:
        raise ValidationError({"url": "One Apprise URL per channel: add a channel for each."})
    if not target.checkable:
        raise ValidationError({"url": senders.APPRISE_REFUSED})
    if target.host:
        _check_target({"url": targets.refusal(target.host, target.port)})
    # Only the service and the scheme: in Apprise URLs the "host" is often the token itself (tgram://bot
    # token/…, pover://user@token) and an ntfy topic is its own password.
    return {"url": url}, f"{target.service} ({target.scheme}://…)"


def _browser_settings(subscription: dict[str, Any] | None) -> tuple[dict, str]:
    endpoint = str((subscription or {}).get("endpoint", ""))
    keys = (subscription or {}).get("keys") or {}
    if not endpoint.startswith(("https://", "http://")) or not keys.get("p256dh") or not keys.get("auth"):
        raise ValidationError({"subscription": "The browser sent no usable push subscription."})
    try:
        parts = urlsplit(endpoint)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ValidationError({"subscription": "The browser sent no usable push subscription."}) from None
    if senders.webpush_refusal(endpoint):
        raise ValidationError({"subscription": "A push service is reached over https."})
    _check_target({"subscription": targets.refusal(parts.hostname or "", port)})
    sub = {"endpoint": endpoint, "keys": {"p256dh": str(keys["p256dh"]), "auth": str(keys["auth"])}}
    return {"subscription": sub}, parts.hostname or "push service"


def _settings_for(
    kind: str, *, url: str, secret: str, subscription: dict[str, Any] | None
) -> tuple[dict, str]:
    """(what gets sealed, the masked display) for a new or changed channel; ValidationError on bad input, or on
    a target the hub won't reach (``notify.targets``)."""
    if kind == Channel.Kind.WEBHOOK:
        _validate_webhook_url(url)
        secret = secret or _secrets.token_urlsafe(32)
        return {"url": url, "secret": secret}, f"{_mask_url(url)} · signed"
    if kind == Channel.Kind.APPRISE:
        return _apprise_settings(url)
    if kind == Channel.Kind.BROWSER:
        return _browser_settings(subscription)
    return {}, ""


def channel_create(
    *,
    owner: Any | None,
    kind: str,
    name: str,
    address: str = "",
    url: str = "",
    secret: str = "",
    subscription: dict[str, Any] | None = None,
    enabled: bool = True,
    **events: bool,
) -> Channel:
    """A new channel. ``owner=None`` makes a household channel (the caller checks that an admin asks:
    :func:`channel_add` does)."""
    sealed, display = _settings_for(kind, url=url, secret=secret, subscription=subscription)
    channel = Channel(
        owner=owner,
        kind=kind,
        name=confirm.name_line(name) or Channel.Kind(kind).label,
        address=address,
        enabled=enabled,
    )
    if kind == Channel.Kind.EMAIL:
        if not address:
            raise ValidationError({"address": "Enter the address to write to."})
        _check_email_address(address)
        display = address
    channel.sealed, channel.display = crypto.seal(sealed), display
    _apply_events(channel, events)
    channel.full_clean()
    channel.save()
    return channel


def _check_email_address(address: str) -> None:
    """An address whose domain is a private address literal is refused when it is added or changed, and again
    at every send (``notify.senders.send_email``, ``notify.confirm.confirmation_mail_send``)."""
    if senders.mail_domain_blocked(address):
        raise ValidationError({"address": targets.PRIVATE_MAIL})


def channel_add(
    *, by: Any, link_origin: Callable[[], str], household: bool = False, **fields: Any
) -> Channel:
    """A channel added by ``by`` through a door (page or API): theirs, or with ``household`` a household channel,
    which only admins may add (PermissionDenied). A kind or address ``by`` may not have is ChannelRefused
    (``notify.selectors.channel_refusal``). An email channel starts unconfirmed and its address is asked to
    confirm, with links on ``link_origin()`` (``notify.confirm``); a refusal there adds nothing. The rest as
    :func:`channel_create`."""
    if household:
        require_household_admin(by)
    require_channel_allowed(by, kind=fields.get("kind", ""), address=fields.get("address", ""))
    with transaction.atomic():
        channel = channel_create(owner=None if household else by, **fields)
        if channel.kind == Channel.Kind.EMAIL:
            confirm.confirmation_request(channel=channel, by=by, link_origin=link_origin)
    return channel


def channel_confirm_resend(*, channel: Channel, by: Any, link_origin: Callable[[], str]) -> None:
    """Mail the confirmation link of an email channel again (the earlier link stops working); the limits are
    ``notify.confirm``'s. ValidationError when there is nothing to confirm."""
    if not channel.awaits_confirmation:
        raise ValidationError("This channel's address is confirmed already: there is nothing to resend.")
    with transaction.atomic():
        confirm.confirmation_request(channel=channel, by=by, link_origin=link_origin)


def _apply_events(channel: Channel, events: dict[str, bool]) -> None:
    allowed = HOUSEHOLD_EVENTS if channel.is_household else PERSONAL_EVENTS
    for event, flag in EVENT_FLAGS.items():
        if flag in events:
            setattr(channel, flag, bool(events[flag]) and event in allowed)
        elif event not in allowed:
            setattr(channel, flag, False)


def channel_update(
    *,
    channel: Channel,
    by: Any = None,
    link_origin: Callable[[], str] | None = None,
    name: str | None = None,
    enabled: bool | None = None,
    address: str | None = None,
    url: str = "",
    secret: str = "",
    **events: bool,
) -> Channel:
    """Change a channel. An empty ``url``/``secret`` keeps the stored one (they are never shown back). A new email
    address must be one the channel's owner may have, waits for confirmation, and is asked for it as
    :func:`channel_add` asks (``by`` and ``link_origin`` are needed then)."""
    if name is not None:
        channel.name = confirm.name_line(name) or channel.name
    if enabled is not None:
        channel.enabled = enabled
    readdressed = channel.kind == Channel.Kind.EMAIL and bool(address) and address != channel.address
    if readdressed and channel.owner_id is not None:
        require_channel_allowed(channel.owner, kind=channel.kind, address=address or "")
    if readdressed:
        _check_email_address(address or "")
    if readdressed:
        channel.address = channel.display = address or ""
    if channel.kind in (Channel.Kind.WEBHOOK, Channel.Kind.APPRISE) and (url or secret):
        try:
            stored = crypto.unseal(channel.sealed)
        except crypto.SecretUnreadable:
            stored = {}
        new_url = url or stored.get("url", "")
        if not new_url:
            raise ValidationError({"url": "The stored URL can't be read any more: enter it again."})
        sealed, display = _settings_for(
            channel.kind, url=new_url, secret=secret or stored.get("secret", ""), subscription=None
        )
        channel.sealed, channel.display = crypto.seal(sealed), display
    _apply_events(channel, events)
    channel.full_clean()
    with transaction.atomic():
        channel.save()
        if readdressed:  # the old address's link stops working; the new one is asked (a refusal undoes all)
            confirm.confirmations_cancel(channel=channel)
            confirm.confirmation_request(channel=channel, by=by, link_origin=link_origin or _no_origin)
    return channel


def _no_origin() -> str:
    raise ValueError("a new email address needs the door's link_origin for its confirmation mail")


def channel_delete(*, channel: Channel) -> None:
    with transaction.atomic():
        confirm.confirmations_cancel(
            channel=channel
        )  # its pending link no longer blocks another to the address
        channel.delete()  # its deliveries go with it


def browser_subscribe(*, owner: Any, subscription: dict[str, Any], name: str = "") -> Channel:
    """This browser's Web Push subscription as a channel; subscribing again with the same endpoint replaces it."""
    endpoint = str((subscription or {}).get("endpoint", ""))
    for existing in Channel.objects.filter(owner=owner, kind=Channel.Kind.BROWSER):
        try:
            if crypto.unseal(existing.sealed).get("subscription", {}).get("endpoint") == endpoint:
                existing.delete()
        except crypto.SecretUnreadable:
            existing.delete()
    return channel_create(
        owner=owner, kind=Channel.Kind.BROWSER, name=name or "This browser", subscription=subscription
    )


def browser_unsubscribe(*, owner: Any, endpoint: str) -> int:
    gone = 0
    for existing in Channel.objects.filter(owner=owner, kind=Channel.Kind.BROWSER):
        try:
            same = crypto.unseal(existing.sealed).get("subscription", {}).get("endpoint") == endpoint
        except crypto.SecretUnreadable:
            same = False
        if same:
            existing.delete()
            gone += 1
    return gone


class TestTooSoon(Exception):
    """A test refused by the limits above; ``str()`` says why and when the next one may go."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _test_allowed(channel: Channel, now: dt.datetime) -> None:
    tests = Delivery.objects.filter(event=Event.TEST, attempt=1)
    last = tests.filter(channel=channel).order_by("-created").values_list("created", flat=True).first()
    if last is not None and now - last < TEST_COOLDOWN:
        wait = max(1, int((last + TEST_COOLDOWN - now).total_seconds() + 0.999))
        raise TestTooSoon(f"A test went to “{channel.name}” moments ago: send another in {wait} s.", wait)
    hour = list(
        tests.filter(channel__owner_id=channel.owner_id, created__gt=now - dt.timedelta(hours=1))
        .order_by("created")
        .values_list("created", flat=True)[:TEST_PER_HOUR]
    )
    if len(hour) >= TEST_PER_HOUR:
        wait = max(1, int((hour[0] + dt.timedelta(hours=1) - now).total_seconds() + 0.999))
        minutes = max(1, (wait + 59) // 60)
        raise TestTooSoon(
            f"That is {TEST_PER_HOUR} tests within an hour: send another in {minutes} min.", wait
        )


def channel_test(*, channel: Channel) -> Delivery:
    """ "Send a test": one delivery of the test event, through the same task and retries as the real ones.
    Raises TestTooSoon past the limits (``TEST_COOLDOWN`` per channel, ``TEST_PER_HOUR`` per person), and
    ChannelRefused for a channel that may send nothing now (``notify.selectors.channel_silent_reason``)."""
    silent = channel_silent_reason(channel)
    if silent:
        raise ChannelRefused(f"“{channel.name}” sends nothing: {silent}.")
    _test_allowed(channel, timezone.now())
    delivery = Delivery.objects.create(channel=channel, event=Event.TEST, key=f"test:{uuid.uuid4().hex}")
    _enqueue(delivery.pk)
    return delivery


def channel_rekey_all() -> tuple[int, int]:
    """Re-seal every channel's settings under the current SECRET_KEY (after rotating it). Returns (re-sealed,
    unreadable): an unreadable channel is left as it is (its owner enters the URL or secret again)."""
    done = lost = 0
    for pk, sealed in Channel.objects.exclude(sealed="").values_list("pk", "sealed"):
        try:
            Channel.objects.filter(pk=pk).update(sealed=crypto.rotate(sealed))
            done += 1
        except crypto.SecretUnreadable:
            lost += 1
    return done, lost


# -- events ----------------------------------------------------------------------------------------------------
def device_locked(*, device_id: int, since: dt.datetime | None = None) -> None:
    """The hook ``devices.services.device_set_state`` calls when a device becomes locked. Never raises."""
    try:
        stamp = int((since or timezone.now()).timestamp())
        notify_event(
            Event.DEVICE_LOCKED, device_id=device_id, key=f"{Event.DEVICE_LOCKED}:{device_id}:{stamp}"
        )
    except Exception:
        logger.exception("notifications for device %s (locked) could not be prepared", device_id)


def notify_event(
    event: str, *, job_id: int | None = None, device_id: int | None = None, key: str
) -> list[int]:
    """One pending delivery per channel that wants ``event``; each is sent by a task after commit.

    Job events go to the job owner's own channels; household events to the household channels. ``key`` names
    what happened: the same key twice (a hook run twice) makes no second delivery.
    """
    if event in PERSONAL_EVENTS:
        job = Job.objects.filter(pk=job_id).select_related("owner").first()
        if job is None or not job.owner.is_active:
            return []
        channels = Channel.objects.filter(Channel.wanting(event), owner=job.owner)
        device_id = job.device_id
    else:
        channels = Channel.objects.filter(Channel.wanting(event), owner__isnull=True)
    made = []
    with transaction.atomic():
        for channel_id in channels.values_list("pk", flat=True):
            delivery, created = Delivery.objects.get_or_create(
                channel_id=channel_id,
                key=key[:100],
                attempt=1,
                defaults={"event": event, "job_id": job_id, "device_id": device_id},
            )
            if created:
                made.append(delivery.pk)
                _enqueue(delivery.pk)
    return made


def _enqueue(delivery_id: int, countdown: float = 0) -> None:
    """``notify.tasks.deliver`` after commit, sent by its name: the tasks are thin ways into this module, which
    never imports them (a signature keeps Celery's own behaviour: eager mode, countdowns)."""

    def send() -> None:
        current_app.signature("notify.tasks.deliver", args=(delivery_id,)).apply_async(
            countdown=countdown or None
        )

    transaction.on_commit(send, robust=True)  # a broker hiccup is logged; it never reaches the caller


# -- one attempt ---------------------------------------------------------------------------------------------
def delivery_attempt(*, delivery_id: int) -> str:
    """Claim, send, record. Returns the row's new status ("" when someone else had it or it is gone)."""
    now = timezone.now()
    claimed = (
        Delivery.objects.filter(pk=delivery_id)
        .filter(
            Q(status=Delivery.Status.PENDING)
            | Q(status=Delivery.Status.SENDING, claimed_at__lt=now - _claim_stale())
        )
        .update(status=Delivery.Status.SENDING, claimed_at=now)
    )
    if not claimed:
        return ""
    delivery = Delivery.objects.select_related(
        "channel", "channel__owner", "job", "job__owner", "job__device", "device"
    ).get(pk=delivery_id)
    channel = delivery.channel
    if not channel.enabled and delivery.event != Event.TEST:
        return _finish(delivery, Delivery.Status.FAILED, "the channel was turned off before it was sent")
    silent = channel_silent_reason(channel)  # checked at sending: an address can be changed after the event
    if silent:
        return _finish(delivery, Delivery.Status.FAILED, f"not sent: {silent}")
    stored: dict[str, Any] = {}
    try:
        stored = crypto.unseal(channel.sealed)
        message = build_message(delivery)
        _send(channel, stored, message)
    except crypto.SecretUnreadable as exc:
        return _finish(delivery, Delivery.Status.FAILED, str(exc))
    except senders.SendError as exc:
        reason = senders.redact(exc.reason, *_secret_values(stored))
        return _failed(delivery, reason, permanent=exc.permanent)
    except Exception as exc:  # noqa: BLE001 - an unexpected error is one more failed attempt, never a lost job
        logger.warning("delivery %s: unexpected %s", delivery_id, exc.__class__.__name__)
        return _failed(delivery, f"unexpected error ({exc.__class__.__name__})", permanent=False)
    return _finish(delivery, Delivery.Status.SENT, "")


def delivery_sweep(*, now: dt.datetime | None = None) -> int:
    """Beat's safety net: enqueue again what no task holds any more. A delivery stays pending when its enqueue
    failed (Redis away at that moment: the after-commit hook logs and goes on), and "sending" when its worker
    died mid-send. Each is given a new task once it is clearly overdue; running one twice is harmless (claim)."""
    now = now or timezone.now()
    longest = max(settings.NOTIFY_RETRY_DELAYS_S or [0.0])
    overdue = Delivery.objects.filter(
        Q(
            status=Delivery.Status.PENDING,
            created__lt=now - dt.timedelta(seconds=settings.NOTIFY_SWEEP_AFTER_S + longest),
        )
        | Q(status=Delivery.Status.SENDING, claimed_at__lt=now - _claim_stale())
    )
    ids = list(overdue.order_by("id").values_list("pk", flat=True)[:SWEEP_BATCH])
    for delivery_id in ids:
        _enqueue(delivery_id)
    return len(ids)


def _secret_values(stored: dict[str, Any]) -> list[str]:
    sub = stored.get("subscription") or {}
    return [
        str(v)
        for v in (
            stored.get("url"),
            stored.get("secret"),
            sub.get("endpoint"),
            *(sub.get("keys") or {}).values(),
        )
        if v
    ]


def _send(channel: Channel, stored: dict[str, Any], message: senders.Message) -> None:
    if channel.kind == Channel.Kind.EMAIL:
        senders.send_email(channel.address, message)
    elif channel.kind == Channel.Kind.APPRISE:
        senders.send_apprise(stored["url"], message)
    elif channel.kind == Channel.Kind.WEBHOOK:
        senders.send_webhook(stored["url"], stored["secret"], message)
    elif channel.kind == Channel.Kind.BROWSER:
        senders.send_webpush(stored["subscription"], message)
    else:  # pragma: no cover - the choices above are all there is
        raise senders.SendError(f"unknown channel kind {channel.kind!r}", permanent=True)


def _finish(delivery: Delivery, status: str, reason: str) -> str:
    Delivery.objects.filter(pk=delivery.pk, status=Delivery.Status.SENDING).update(
        status=status, reason=reason[:500], finished_at=timezone.now()
    )
    return status


def _failed(delivery: Delivery, reason: str, *, permanent: bool) -> str:
    delays = settings.NOTIFY_RETRY_DELAYS_S
    if permanent or delivery.attempt > len(delays):
        return _finish(delivery, Delivery.Status.FAILED, reason)
    delay = delays[delivery.attempt - 1]
    at = timezone.now() + dt.timedelta(seconds=delay)
    with transaction.atomic():
        if not Delivery.objects.filter(pk=delivery.pk, status=Delivery.Status.SENDING).update(
            status=Delivery.Status.RETRYING,
            reason=reason[:500],
            finished_at=timezone.now(),
            next_attempt_at=at,
        ):
            return ""
        try:
            with transaction.atomic():
                following = Delivery.objects.create(
                    channel_id=delivery.channel_id,
                    job_id=delivery.job_id,
                    device_id=delivery.device_id,
                    event=delivery.event,
                    key=delivery.key,
                    attempt=delivery.attempt + 1,
                )
        except IntegrityError:  # the next attempt exists already (this one ran twice)
            return Delivery.Status.RETRYING
        _enqueue(following.pk, countdown=delay)
    return Delivery.Status.RETRYING


# -- what is said ----------------------------------------------------------------------------------------------
def build_message(delivery: Delivery) -> senders.Message:
    event = delivery.event
    job, device = delivery.job, delivery.device or (delivery.job.device if delivery.job else None)
    if event == Event.RESULTS_EXPIRING:
        path, title, body, data = expiring_message(delivery)
    elif job is not None and event in PERSONAL_EVENTS:
        path, title, body, data = _job_message(job, event)
    elif event in HOUSEHOLD_EVENTS and device is not None:
        path, title, body, data = _device_message(device, event)
    elif event == Event.BACKUP_FAILED:
        path, data = "/health/", {}
        title = "The daily backup failed"
        body = "The hub could not take its daily backup. The Health page says why."
    else:
        path, data = "/notify/", {}
        # The name is the person's, not the hub's: on its own labelled line, plain text, never the first words.
        title = "Test from Tiiny Hub"
        body = f"This is a test: if you read it, the channel works.\nChannel: “{confirm.name_line(delivery.channel.name)}”"
    return senders.Message(
        event=event,
        title=title,
        body=body,
        path=path,
        url=f"{senders.base_url()}{path}",
        tag=f"hub-{event}-{job.pk if job else (device.pk if device else delivery.pk)}",
        data=data,
        delivery_id=delivery.pk,
        attempt=delivery.attempt,
    )


def _job_message(job: Job, event: str) -> tuple[str, str, str, dict[str, Any]]:
    """(path, title, body, data) of a message about a person's job: it started, finished or failed."""
    title_text = job_title(job, limit=80)
    data = {
        "job": {
            "id": job.pk,
            "kind": job.kind,
            "state": job.state,
            "title": title_text,
            "device": job.device.name,
            "progress": round(job.progress),
            "error": job.error_human or None,
        }
    }
    if event == Event.JOB_DONE:
        took = ""
        if job.started_at and job.finished_at:
            took = f" in {_duration((job.finished_at - job.started_at).total_seconds())}"
        title = f"Finished: {title_text}"
        body = f"{job.get_kind_display()} on {job.device.name}, done{took}."
    elif event == Event.JOB_FAILED:
        title = f"Failed: {title_text}"
        body = job.error_human or "The device reported an error."
    else:
        title, body = f"Started: {title_text}", f"{job.get_kind_display()} on {job.device.name}."
    return f"/jobs/{job.pk}/", title, body, data


def _device_message(device: Device, event: str) -> tuple[str, str, str, dict[str, Any]]:
    """(path, title, body, data) of a message about the box itself: a queue ran empty, a device is locked."""
    if event == Event.QUEUE_EMPTY:
        title, body = f"{device.name}: the queue is empty", "Nothing is waiting or running on it any more."
    elif event == Event.DISK_FULL:
        title = "The hub's disk is full"
        body = (
            f"A result from {device.name} waits for disk space ({_free_text()} free) and is saved by itself once "
            "there is room. Delete old results on the Usage page, or free space on the hub's machine."
        )
    else:
        title = f"{device.name} is locked"
        body = " ".join(filter(None, [device.state_message, device.state_fix])) or "It refuses every call."
    data = {"device": {"id": device.pk, "name": device.name, "state": device.state}}
    path = (
        "/health/" if event == Event.DISK_FULL else f"/devices/{device.pk}/"
    )  # the health page shows the disk
    return path, title, body, data


def _free_text() -> str:
    try:
        return disk_space().free_text
    except OSError:
        return "unknown"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds // 3600} h {round(seconds % 3600 / 60)} min"
