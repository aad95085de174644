"""Reads for the notification pages, the job page and ``/api/notify`` — and who may see what.

The rules, once for every door: a channel is its owner's alone (an admin gets "not found" for a person's channel
too); household channels are admins' (:func:`require_household_admin`). Anything a person may not manage is
"not found", exactly like a channel that does not exist (no existence leak).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import F, Q, QuerySet
from django.http import Http404

from hub.parsing import parse_id
from notify.models import Channel, Delivery

RECENT_SHOWN = 30
HOUSEHOLD_ONLY = "Household channels are for admins."
NO_SUCH_CHANNEL = "No such channel."
#: Viewers watch: their own browser, and mail to their own confirmed address. A webhook or an Apprise URL is a way
#: to make the hub call any address on the network or write to any service in the household's name.
VIEWER_KINDS = (Channel.Kind.BROWSER, Channel.Kind.EMAIL)
VIEWER_KIND_REFUSED = (
    "Viewers can have notifications in their browser (Web Push) or by email to their own address; webhooks and "
    "Apprise channels are for members and admins."
)


class ChannelRefused(PermissionDenied):
    """A channel this person may not have (its kind, or an address not theirs): ``str()`` says why."""


def may_manage_household(user: Any) -> bool:
    return bool(getattr(user, "is_admin", False))


def require_household_admin(user: Any) -> None:
    """PermissionDenied unless ``user`` may see and change household channels (admins)."""
    if not may_manage_household(user):
        raise PermissionDenied(HOUSEHOLD_ONLY)


def channel_kinds_for(user: Any) -> tuple[str, ...]:
    """The kinds of channel ``user`` may add: any for people who may submit (members, admins: the accounts rule,
    ``User.can_submit``), :data:`VIEWER_KINDS` for viewers."""
    return tuple(Channel.Kind.values) if getattr(user, "can_submit", False) else VIEWER_KINDS


def channel_refusal(user: Any, *, kind: str, address: str = "") -> str:
    """Why ``user`` may not have a channel of ``kind`` writing to ``address``; "" when they may. The one rule for
    every door (the pages, /api/notify, the test button) and for each delivery (a person who became a viewer
    keeps their channels, which then send nothing)."""
    if kind not in channel_kinds_for(user):
        return VIEWER_KIND_REFUSED
    if kind == Channel.Kind.EMAIL and not getattr(user, "can_submit", False):
        own = (getattr(user, "email", "") or "").strip()
        if not own:
            return (
                "Viewers can have email sent to their own address only: add yours on the Settings page first."
            )
        if address.strip().lower() != own.lower():
            return f"Viewers can have email sent to their own address only ({own}, from the Settings page)."
    return ""


def require_channel_allowed(user: Any, *, kind: str, address: str = "") -> None:
    """:class:`ChannelRefused` (a 403 on the API, a form error on the pages) unless :func:`channel_refusal` is
    empty."""
    refusal = channel_refusal(user, kind=kind, address=address)
    if refusal:
        raise ChannelRefused(refusal)


def channel_silent_reason(channel: Channel) -> str:
    """Why ``channel`` may send nothing at all now ("" when it may): its owner may not have such a channel any
    more, or its address waits for confirmation. Household channels are their admins' (no owner to ask)."""
    if channel.owner_id is not None:
        refusal = channel_refusal(channel.owner, kind=channel.kind, address=channel.address)
        if refusal:
            return refusal
    if channel.awaits_confirmation:
        return (
            "its address has not been confirmed yet: open the link mailed to it (the Notifications page "
            "sends it again)"
        )
    return ""


def channels_of(user: Any) -> QuerySet[Channel]:
    return Channel.objects.filter(owner=user).order_by("name", "id")


def household_channels() -> QuerySet[Channel]:
    return Channel.objects.filter(owner__isnull=True).order_by("name", "id")


def channels_managed_by(user: Any, *, household: bool | None = None) -> QuerySet[Channel]:
    """The channels ``user`` manages: their own, then (admins) the household's. ``household=False``: their own
    only; ``True``: the household's only (PermissionDenied for anyone but an admin)."""
    if household:
        require_household_admin(user)
        return household_channels()
    if household is False or not may_manage_household(user):
        return channels_of(user)
    return Channel.objects.filter(Q(owner=user) | Q(owner__isnull=True)).order_by(
        F("owner_id").asc(nulls_last=True), "name", "id"
    )


def channel_for(user: Any, channel_id: int) -> Channel | None:
    """A channel this person may change: their own; household ones for admins. Anything else is "not found"."""
    channel = Channel.objects.filter(pk=channel_id).first()
    if channel is None:
        return None
    if channel.owner_id == user.pk or (channel.owner_id is None and may_manage_household(user)):
        return channel
    return None


def channel_or_404(user: Any, raw_id: Any) -> Channel:
    """:func:`channel_for` from a raw id (a path parameter): Http404 for a bad id, a missing channel or one
    ``user`` may not manage, all alike."""
    pk = parse_id(raw_id)
    channel = channel_for(user, pk) if pk is not None else None
    if channel is None:
        raise Http404(NO_SUCH_CHANNEL)
    return channel


def deliveries_of(channel: Channel) -> QuerySet[Delivery]:
    """Every attempt to tell ``channel``, newest first (the caller has checked access with channel_for)."""
    return Delivery.objects.filter(channel=channel).order_by("-created", "-id")


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
