"""Notification channels (where to tell someone) and deliveries (each attempt to tell them).

A Channel belongs to one person, or to nobody: a household channel, set by admins, for events about the box
itself (the queue ran empty, a device is locked). Its secrets (a webhook's URL and signing secret, an Apprise
URL, a Web Push subscription) are sealed at rest (``notify.crypto``) and only ever shown masked (``display``).

An email channel sends nothing until its address is confirmed: an EmailConfirmation is one mail with a link
that proves the mailbox's owner wants these messages (``notify.confirm`` holds the rules).

A Delivery is one attempt: the task that sends it first claims the row (pending → sending, a conditional
UPDATE), so a task run twice sends once. A failed attempt that may succeed later is marked ``retrying`` and
the next attempt is a new row with ``attempt + 1``, so every try stays on record with its reason.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Event(models.TextChoices):
    JOB_DONE = "job.done", "My job finished"
    JOB_FAILED = "job.failed", "My job failed"
    JOB_STARTED = "job.started", "My job started"
    QUEUE_EMPTY = "queue.empty", "The queue is empty"
    DEVICE_LOCKED = "device.locked", "A device is locked"
    BACKUP_FAILED = "backup.failed", "The daily backup failed"
    DISK_FULL = "disk.full", "The hub's disk is full"
    # Told to the channels that want "my job finished" (no flag of its own): a retention rule will move some of
    # the person's results to the trash in a week (``jobs.queue.retention``).
    RESULTS_EXPIRING = "results.expiring", "My results go to the trash soon"
    TEST = "test", "Test"


PERSONAL_EVENTS = (Event.JOB_DONE, Event.JOB_FAILED, Event.JOB_STARTED)
# Household channels hear about the box itself, never about a person's job (its prompt may be private).
HOUSEHOLD_EVENTS = (Event.QUEUE_EMPTY, Event.DEVICE_LOCKED, Event.BACKUP_FAILED, Event.DISK_FULL)
#: event -> the Channel flag that subscribes to it
EVENT_FLAGS = {
    Event.JOB_DONE: "on_done",
    Event.JOB_FAILED: "on_failed",
    Event.JOB_STARTED: "on_started",
    Event.QUEUE_EMPTY: "on_queue_empty",
    Event.DEVICE_LOCKED: "on_device_locked",
    Event.BACKUP_FAILED: "on_backup_failed",
    Event.DISK_FULL: "on_disk_full",
}


class Channel(models.Model):
    class Kind(models.TextChoices):
        BROWSER = "browser", "This browser (Web Push)"
        EMAIL = "email", "Email"
        APPRISE = "apprise", "Push service or chat app (Apprise URL)"
        WEBHOOK = "webhook", "Webhook"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="notify_channels",
        help_text="Empty: a household channel (admins set it).",
    )
    kind = models.CharField(max_length=10, choices=Kind.choices)
    name = models.CharField(max_length=100)
    enabled = models.BooleanField(default=True)
    on_done = models.BooleanField(default=True)
    on_failed = models.BooleanField(default=True)
    on_started = models.BooleanField(default=False)  # opt-in: most people only want the end
    on_queue_empty = models.BooleanField(default=False)  # household channels only
    on_device_locked = models.BooleanField(default=False)  # household channels only
    on_backup_failed = models.BooleanField(default=True)  # household channels only (backups/)
    # household channels only; on by default: a result waits for space until someone frees it
    on_disk_full = models.BooleanField(default=True)
    address = models.EmailField(blank=True, default="")  # email: not a secret, shown in full
    # Email: the address whose owner opened the confirmation link (notify.confirm). Until it equals ``address``
    # the channel sends nothing: the hub writes to nobody who did not ask for it.
    confirmed_address = models.EmailField(blank=True, default="")
    sealed = models.TextField(
        blank=True, default="", editable=False
    )  # notify.crypto: URL, secret, subscription
    display = models.CharField(max_length=200, blank=True, default="")  # the masked form, safe to show
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["owner_id", "name", "id"]
        indexes = [models.Index(fields=["owner", "enabled"], name="notify_channel_owner_idx")]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"

    def __repr__(self) -> str:  # never the sealed settings
        return f"<Channel {self.pk} {self.kind} owner={self.owner_id}>"

    @property
    def is_household(self) -> bool:
        return self.owner_id is None

    @staticmethod
    def wanting(event: str) -> models.Q:
        """The channels that want ``event``: turned on, with its flag set. The one place for the rule: every
        delivery's channels are chosen by it (``notify.services.notify_event``)."""
        return models.Q(enabled=True, **{EVENT_FLAGS[Event(event)]: True})

    @property
    def awaits_confirmation(self) -> bool:
        """An email channel whose current address has not been confirmed through its link (it sends nothing)."""
        return self.kind == self.Kind.EMAIL and self.confirmed_address != self.address

    @property
    def event_labels(self) -> list[str]:
        return [Event(e).label for e, flag in EVENT_FLAGS.items() if getattr(self, flag)]


class Delivery(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Waiting to be sent"
        SENDING = "sending", "Sending"
        SENT = "sent", "Sent"
        RETRYING = "retrying", "Failed, will try again"
        FAILED = "failed", "Failed"

    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="deliveries")
    job = models.ForeignKey(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="notify_deliveries"
    )
    device = models.ForeignKey(
        "devices.Device", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    event = models.CharField(max_length=20, choices=Event.choices)
    # What happened, once per channel: e.g. "job.done:42:7" (job 42 entered done with its event seq 7). Every
    # attempt of one notification shares it; (channel, key, attempt) is unique, so a hook or task run twice
    # never makes a second notification.
    key = models.CharField(max_length=100)
    attempt = models.PositiveSmallIntegerField(default=1)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    reason = models.CharField(max_length=500, blank=True, default="")  # why it failed; never a secret
    created = models.DateTimeField(auto_now_add=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)  # when status is retrying

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["channel", "key", "attempt"], name="notify_delivery_once")
        ]
        indexes = [
            models.Index(fields=["channel", "-created"], name="notify_delivery_chan_idx"),
            models.Index(fields=["job", "-created"], name="notify_delivery_job_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.event} → channel {self.channel_id} (attempt {self.attempt}): {self.status}"


class EmailConfirmation(models.Model):
    """One confirmation mail: asked for by ``requested_by`` for ``channel``'s address ``address``.

    Open (``outcome`` empty) until it is confirmed, replaced by a newer one for the same channel, cancelled (the
    channel was deleted or its address changed) or found expired; open and younger than
    ``notify.confirm.CONFIRM_TTL`` it is pending. The rows outlive their channel (SET_NULL), so the limits (one pending per address, so many mails
    an hour per person) can't be reset by deleting a channel and adding it again.
    """

    class Outcome(models.TextChoices):
        OPEN = "", "Waiting"
        CONFIRMED = "confirmed", "Confirmed"
        REPLACED = "replaced", "Replaced by a newer link"
        CANCELLED = "cancelled", "Cancelled"
        EXPIRED = "expired", "Expired"

    channel = models.ForeignKey(
        Channel, null=True, blank=True, on_delete=models.SET_NULL, related_name="confirmations"
    )
    address = models.EmailField()
    # The address in lower case while the row is open, else NULL: one open link per address, kept by the database
    # itself, so two requests racing for one address can't both send (NULLs never collide).
    open_for = models.CharField(max_length=254, null=True, blank=True, unique=True, editable=False)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)  # the worker handed the mail to the mail server
    outcome = models.CharField(max_length=10, choices=Outcome.choices, default=Outcome.OPEN, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [
            models.Index(fields=["address", "outcome", "created"], name="notify_confirm_address_idx"),
            models.Index(fields=["requested_by", "created"], name="notify_confirm_by_idx"),
        ]

    def __str__(self) -> str:
        return f"confirmation {self.pk} of channel {self.channel_id}: {self.outcome or 'open'}"


class PrivateHost(models.Model):
    """A host on the private network that every channel may reach (the household's Home Assistant, a LAN ntfy):
    admins add it on the Private hosts page; ``HUB_NOTIFY_PRIVATE_HOSTS`` allows more (``notify.targets``)."""

    host = models.CharField(
        max_length=253
    )  # a name, or an address in its plain form (notify.targets.parse_entry)
    port = models.PositiveIntegerField(null=True, blank=True)  # empty: any port
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["host", "port"]
        constraints = [models.UniqueConstraint(fields=["host", "port"], name="notify_private_host_once")]

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 address: its port stays apart
        return f"{host}:{self.port}" if self.port else self.host
