"""Schemas of ``/api/notify`` (django-ninja / pydantic): what goes in, what comes out.

As in ``jobs.kinds.schemas``, input schemas carry **types only** and forbid unknown fields. Whether a value is
acceptable (an email address, a URL Apprise knows, a name of at most 100 characters, which events a household
channel hears) is ``notify.forms.ChannelForm``'s and ``notify.services``' business, so the API answers with the
page's own messages. Secrets go in (``url``, ``secret``) and never come out: answers carry ``display``, the masked
form the pages show.
"""

from __future__ import annotations

import datetime as dt

from ninja import Schema
from pydantic import Field

from jobs.kinds.schemas import Strict

_EVENTS_PERSONAL = "Your channels: `on_done`, `on_failed`, `on_started`."
_EVENTS_HOUSEHOLD = (
    "Household channels: `on_queue_empty`, `on_device_locked`, `on_backup_failed`, `on_disk_full`."
)


class _ChannelFields(Strict):
    name: str | None = Field(default=None, description="So you can tell them apart (at most 100 characters).")
    address: str | None = Field(default=None, description="Email: the address to write to.")
    url: str | None = Field(
        default=None,
        description="Apprise: one Apprise URL (e.g. `ntfy://my-topic`); webhook: the http(s) address that "
        "receives the JSON. Stored encrypted and never shown again.",
    )
    secret: str | None = Field(
        default=None,
        description="Webhook: the signing secret (left out, one is made). Stored encrypted, never shown again.",
    )
    enabled: bool | None = Field(default=None, description="Off: nothing is sent (tests still are).")
    on_done: bool | None = Field(default=None, description="When my job finishes. " + _EVENTS_PERSONAL)
    on_failed: bool | None = Field(default=None, description="When my job fails.")
    on_started: bool | None = Field(default=None, description="When my job starts.")
    on_queue_empty: bool | None = Field(
        default=None, description="When the queue runs empty. " + _EVENTS_HOUSEHOLD
    )
    on_device_locked: bool | None = Field(default=None, description="When a device is locked.")
    on_backup_failed: bool | None = Field(default=None, description="When the daily backup fails.")
    on_disk_full: bool | None = Field(
        default=None, description="When the hub's disk is full and a finished result waits for space."
    )


class ChannelIn(_ChannelFields):
    """A new channel. Fields left out take the add form's defaults (on, finished and failed ticked)."""

    kind: str | None = Field(default=None, description="`email`, `apprise` or `webhook`.")
    household: bool | None = Field(
        default=None, description="Admins: a household channel (the box's events, nobody's job)."
    )


class ChannelPatchIn(_ChannelFields):
    """The fields to change; the rest stays. An empty `url` or `secret` keeps the stored one."""


class ChannelOut(Schema):
    id: int
    kind: str = Field(description="`email`, `apprise`, `webhook` or `browser` (Web Push).")
    kind_label: str
    name: str
    household: bool = Field(description="True: a household channel (admins manage it).")
    enabled: bool
    display: str = Field(description="The masked settings (e.g. `https://host/… · signed`); never a secret.")
    address: str = Field(description="Email channels: the address (not a secret); empty otherwise.")
    awaits_confirmation: bool = Field(
        description="Email channels: true until the link mailed to the address is opened; it sends nothing till then."
    )
    events: list[str] = Field(description="The events it is subscribed to, e.g. `job.done`.")
    on_done: bool
    on_failed: bool
    on_started: bool
    on_queue_empty: bool
    on_device_locked: bool
    on_backup_failed: bool
    on_disk_full: bool
    created: dt.datetime
    updated: dt.datetime
    web_url: str = Field(
        description="Its page (edit, test, delete). Not the channel's own URL: that is never shown."
    )
    api_url: str
    deliveries_url: str


class DeliveryOut(Schema):
    id: int
    channel: int
    event: str = Field(
        description="`job.done`, `job.failed`, `job.started`, `queue.empty`, `device.locked`, `test`."
    )
    event_label: str
    attempt: int = Field(
        description="1 for the first try; each retry is a new delivery with the next number."
    )
    status: str = Field(description="`pending`, `sending`, `sent`, `retrying` or `failed`.")
    status_label: str
    reason: str = Field(description="Why it failed (never a secret); empty when it did not.")
    job: int | None = Field(description="The job it is about (your own), if any.")
    device: int | None
    created: dt.datetime
    claimed_at: dt.datetime | None
    finished_at: dt.datetime | None
    next_attempt_at: dt.datetime | None = Field(description="While retrying: when the next attempt goes.")


class DeliveryListOut(Schema):
    items: list[DeliveryOut]
    next: str | None = Field(description="Pass as `cursor` for the next (older) page; null on the last one.")
