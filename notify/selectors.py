"""Reads for the notification pages and the job page."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from notify.models import Channel, Delivery

RECENT_SHOWN = 30


def channels_of(user: Any) -> QuerySet[Channel]:
    return Channel.objects.filter(owner=user).order_by("name", "id")


def household_channels() -> QuerySet[Channel]:
    return Channel.objects.filter(owner__isnull=True).order_by("name", "id")


def channel_for(user: Any, channel_id: int) -> Channel | None:
    """A channel this person may change: their own; household ones for admins. Anything else is "not found"."""
    channel = Channel.objects.filter(pk=channel_id).first()
    if channel is None:
        return None
    if channel.owner_id == user.pk or (channel.owner_id is None and user.is_admin):
        return channel
    return None


def recent_deliveries(user: Any, *, household: bool = False) -> QuerySet[Delivery]:
    qs = (
        Delivery.objects.filter(channel__owner__isnull=True)
        if household
        else Delivery.objects.filter(channel__owner=user)
    )
    return qs.select_related("channel", "job").order_by("-created", "-id")[:RECENT_SHOWN]


def deliveries_for_job(user: Any, job: Any) -> list[Delivery]:
    """The job's deliveries, for its owner only (they went to the owner's own channels)."""
    if not user.is_authenticated or job.owner_id != user.pk:
        return []
    return list(
        Delivery.objects.filter(job=job, channel__owner=user)
        .select_related("channel")
        .order_by("created", "id")
    )
