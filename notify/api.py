"""REST routes for notification channels (``/api/notify``): list, add, get, change, delete, send a test, and a
channel's deliveries.

A third door to what the Notifications pages do, and thin like them: who may touch which channel is
``notify.selectors`` (your own channels; the household's for admins; anything else is "No such channel.", a 404
exactly like a missing one), every value is judged by the page's own ``ChannelForm`` and ``notify.services``
(so the messages are the page's), and the change is one service call. Scopes: GET needs ``read``; everything
that changes a channel or sends something needs ``submit`` (a read-only token only reads, also here; viewers,
whose tokens only read, manage their channels on the page or with their browser session). Secrets go in and
never come out: a channel shows its masked ``display``. Errors are JSON by the handlers in ``hub.api``.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.db.models import Q
from django.http import HttpRequest
from django.urls import reverse
from ninja import Query, Router
from ninja.errors import HttpError
from ninja.responses import Status
from pydantic import BaseModel

from hub.api_auth import require_scope
from hub.api_errors import ErrorOut
from hub.cursors import decode_cursor, encode_cursor
from hub.links import link_origin
from hub.ratelimit import RateLimited
from jobs.queue.admission import RequestInvalid
from notify import selectors, services
from notify.forms import ChannelForm
from notify.models import EVENT_FLAGS, Channel, Delivery
from notify.schemas import ChannelIn, ChannelOut, ChannelPatchIn, DeliveryListOut, DeliveryOut

router = Router(tags=["notifications"])

READ, SUBMIT = "read", "submit"
ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 413: ErrorOut, 422: ErrorOut}


class TestTooSoonError(RateLimited):
    """``services.TestTooSoon`` as the API's 429: the page's words, and Retry-After (``hub.api`` adds it)."""

    def __init__(self, message: str, retry_after: int) -> None:
        self.retry_after = retry_after
        HttpError.__init__(self, 429, message)


# -- output ---------------------------------------------------------------------------------------------------
def _abs(request: HttpRequest, path: str) -> str:
    return request.build_absolute_uri(path)


def channel_out(request: HttpRequest, channel: Channel) -> dict[str, Any]:
    """What the channel list shows, and no more: the masked ``display``, never the sealed settings."""
    return {
        "id": channel.pk,
        "kind": channel.kind,
        "kind_label": channel.get_kind_display(),
        "name": channel.name,
        "household": channel.is_household,
        "enabled": channel.enabled,
        "display": channel.display,
        "address": channel.address if channel.kind == Channel.Kind.EMAIL else "",
        "awaits_confirmation": channel.awaits_confirmation,
        "events": [event.value for event, flag in EVENT_FLAGS.items() if getattr(channel, flag)],
        **{flag: getattr(channel, flag) for flag in EVENT_FLAGS.values()},
        "created": channel.created,
        "updated": channel.updated,
        # not "url": that is the webhook's or Apprise's address going in, which never comes out
        "web_url": _abs(request, reverse("notify-channel-edit", args=[channel.pk])),
        "api_url": _abs(request, reverse("api:notify_channel_get", args=[channel.pk])),
        "deliveries_url": _abs(request, reverse("api:notify_channel_deliveries", args=[channel.pk])),
    }


def delivery_out(delivery: Delivery) -> dict[str, Any]:
    return {
        "id": delivery.pk,
        "channel": delivery.channel_id,
        "event": delivery.event,
        "event_label": delivery.get_event_display(),
        "attempt": delivery.attempt,
        "status": delivery.status,
        "status_label": delivery.get_status_display(),
        "reason": delivery.reason,
        "job": delivery.job_id,
        "device": delivery.device_id,
        "created": delivery.created,
        "claimed_at": delivery.claimed_at,
        "finished_at": delivery.finished_at,
        "next_attempt_at": delivery.next_attempt_at,
    }


# -- input: the page's form judges it ----------------------------------------------------------------------------
def _given(payload: BaseModel) -> dict[str, Any]:
    """The fields the request sent (``null`` counts as left out)."""
    return {k: v for k, v in payload.model_dump(exclude_unset=True).items() if v is not None}


def _form_checked(form_kwargs: dict[str, Any], given: dict[str, Any], *, what: str) -> ChannelForm:
    """``ChannelForm`` bound to its own initial values overlaid with ``given`` (what a page pre-fills, with the
    request's changes), validated. A field this form does not have (``on_done`` for a household channel) is
    refused by name, never dropped silently; the form's refusals are a 422 in its own words."""
    blank = ChannelForm(**form_kwargs)
    unknown = sorted(k for k in given if k not in blank.fields)
    if unknown:
        fields = ", ".join(sorted(blank.fields))
        raise RequestInvalid({k: [f"Not a field of {what}; its fields are: {fields}."] for k in unknown})
    data: dict[str, Any] = {}
    for name, field in blank.fields.items():
        if name == "kind":
            continue  # the add form's pre-selected kind is a convenience of the page, not a default
        initial = blank.get_initial_for_field(field, name)
        data[name] = "" if initial is None and isinstance(field, forms.CharField) else initial
    data.update(given)
    form = ChannelForm(data, **form_kwargs)
    if not form.is_valid():
        raise RequestInvalid({name: list(messages) for name, messages in form.errors.items()})
    return form


def _channel(request: HttpRequest, channel_id: str) -> Channel:
    return selectors.channel_or_404(request.user, channel_id)


def _origin(request: HttpRequest):
    """Links in the confirmation mails this request causes (``hub.links``), asked for only when one is sent."""
    return lambda: link_origin(request)


# -- routes ---------------------------------------------------------------------------------------------------
@router.get(
    "/channels",
    url_name="notify_channel_list",
    response={200: list[ChannelOut], **ERRORS},
    summary="List channels",
)
def channel_list(
    request: HttpRequest,
    household: bool | None = Query(
        None,
        description="Left out: your channels, and for admins the household's after them. `false`: yours only; "
        "`true`: the household's only (admins).",
    ),
):
    """The channels you manage, with their kinds, event subscriptions and masked settings (never a secret)."""
    require_scope(request, READ)
    return [channel_out(request, c) for c in selectors.channels_managed_by(request.user, household=household)]


@router.post(
    "/channels",
    url_name="notify_channel_create",
    response={201: ChannelOut, **ERRORS},
    summary="Add a channel",
)
def channel_create(request: HttpRequest, payload: ChannelIn):
    """An email, Apprise or webhook channel, checked as the page's add form checks it. Fields left out take the
    form's defaults: on, with "finished" and "failed" ticked (household channels: only "the disk is full"). Web Push
    channels come from a browser (the Notifications page subscribes it), not from here. Viewers may add email to
    their own address only (403 otherwise). An email channel sends nothing until its address is confirmed through
    the link mailed to it (`awaits_confirmation`)."""
    require_scope(request, SUBMIT)
    given = _given(payload)
    household = bool(given.pop("household", False))
    if household:
        selectors.require_household_admin(request.user)  # before the fields: non-admins learn nothing more
    what = "a household channel" if household else "a channel"
    form = _form_checked({"household": household}, given, what=what)
    data = form.cleaned_data
    channel = services.channel_add(
        by=request.user,
        link_origin=_origin(request),
        household=household,
        kind=data["kind"],
        enabled=data["enabled"],
        **form.channel_values(),
    )
    return Status(201, channel_out(request, channel))


@router.get(
    "/channels/{channel_id}",
    url_name="notify_channel_get",
    response={200: ChannelOut, **ERRORS},
    summary="Get a channel",
)
def channel_get(request: HttpRequest, channel_id: str):
    require_scope(request, READ)
    return channel_out(request, _channel(request, channel_id))


@router.patch(
    "/channels/{channel_id}",
    url_name="notify_channel_update",
    response={200: ChannelOut, **ERRORS},
    summary="Change a channel",
)
def channel_update(request: HttpRequest, channel_id: str, payload: ChannelPatchIn):
    """Only the fields sent change. A new `url` or `secret` replaces the stored one; left out or empty, the
    stored one stays (it is never shown back). The kind can't change: add a new channel instead."""
    require_scope(request, SUBMIT)
    channel = _channel(request, channel_id)
    what = "a household channel" if channel.is_household else "a channel being changed"
    form = _form_checked({"channel": channel, "household": channel.is_household}, _given(payload), what=what)
    data = form.cleaned_data
    services.channel_update(
        channel=channel,
        by=request.user,
        link_origin=_origin(request),
        enabled=data["enabled"],
        **form.channel_values(),
    )
    return channel_out(request, channel)


@router.delete(
    "/channels/{channel_id}",
    url_name="notify_channel_delete",
    response={204: None, **ERRORS},
    summary="Delete a channel",
)
def channel_delete(request: HttpRequest, channel_id: str):
    """The channel and its delivery history."""
    require_scope(request, SUBMIT)
    services.channel_delete(channel=_channel(request, channel_id))
    return Status(204, None)


@router.post(
    "/channels/{channel_id}/test",
    url_name="notify_channel_test",
    response={202: DeliveryOut, 429: ErrorOut, **ERRORS},
    summary="Send a test",
)
def channel_test(request: HttpRequest, channel_id: str):
    """One test message through the same task and retries as the real ones; follow it in the deliveries.
    Limited as on the page: one per channel every 30 s, 20 an hour per person (429 with Retry-After)."""
    require_scope(request, SUBMIT)
    channel = _channel(request, channel_id)
    try:
        delivery = services.channel_test(channel=channel)
    except services.TestTooSoon as exc:
        raise TestTooSoonError(str(exc), exc.retry_after) from None
    return Status(202, delivery_out(delivery))


@router.post(
    "/channels/{channel_id}/confirm",
    url_name="notify_channel_confirm_resend",
    response={202: ChannelOut, **ERRORS},
    summary="Resend an email channel's confirmation link",
)
def channel_confirm_resend(request: HttpRequest, channel_id: str):
    """Mail the confirmation link again (the earlier one stops working). 422 when the address is confirmed
    already, another channel's link to it is still waiting, or you asked for 5 within the hour."""
    require_scope(request, SUBMIT)
    channel = _channel(request, channel_id)
    services.channel_confirm_resend(channel=channel, by=request.user, link_origin=_origin(request))
    return Status(202, channel_out(request, channel))


@router.get(
    "/channels/{channel_id}/deliveries",
    url_name="notify_channel_deliveries",
    response={200: DeliveryListOut, **ERRORS},
    summary="A channel's deliveries",
)
def channel_deliveries(
    request: HttpRequest,
    channel_id: str,
    cursor: str | None = Query(None, description="The `next` of the previous page."),
    limit: int = Query(24, ge=1, le=100),
):
    """Every attempt to tell the channel, newest first, in pages: its event, attempt, status and why it failed."""
    require_scope(request, READ)
    qs = selectors.deliveries_of(_channel(request, channel_id))
    if cursor:
        position = decode_cursor(cursor)
        if position is None:
            raise RequestInvalid({"cursor": ["Not a cursor this API gave out; start again without it."]})
        created, pk = position
        qs = qs.filter(Q(created__lt=created) | Q(created=created, pk__lt=pk))
    rows = list(qs[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return {"items": [delivery_out(d) for d in rows], "next": encode_cursor(rows[-1]) if more else None}
