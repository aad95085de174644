"""Email confirmation: an email channel sends nothing until someone who reads its address opened the link mailed
to it and pressed "Confirm". Without it a member could make the hub write to any address, in the household's
name, with words of their choosing in the mail.

The flow:

1. A new email channel, or a new address on one, asks for a confirmation (:func:`confirmation_request`, inside
   the change's transaction): refused when another channel's confirmation for that address is still pending
   (one at a time per address) or when the person asked for ``MAILS_PER_HOUR`` already; a resend replaces the
   channel's own pending one, whose link then stops working. The row is written and the mail enqueued (by the
   task's name, after commit) with the origin the links are built on (``hub.links.link_origin``).
2. The worker makes the link (:func:`confirmation_token`: the row's id and the address, signed, so no secret
   goes through the broker or sits in the database) and sends the mail (:func:`confirmation_mail_send`).
3. Opening the link needs no sign-in: it proves control of the mailbox, and the person who reads that mailbox
   is the one whose consent counts (often not the channel's owner: a member's partner, the family's shared
   inbox). The page names who asked and waits for a press of "Confirm" (a POST), so a mail scanner that fetches
   every link confirms nothing. :func:`confirmation_accept` spends the row with a compare-and-set UPDATE and
   confirms the channel only if its address is still the one the link names.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections.abc import Callable
from typing import Any

from celery import current_app
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from notify.models import Channel, EmailConfirmation
from notify.senders import mail_domain_blocked

logger = logging.getLogger("notify")

#: how long a confirmation link works (and blocks another one to the same address)
CONFIRM_TTL = dt.timedelta(hours=24)
#: confirmation mails one person may cause in an hour, over all their channels (adding, changing, resending)
MAILS_PER_HOUR = 5
SALT = "notify.confirm"
SUBJECT = "Confirm notifications from Tiiny Hub to this address"
Outcome = EmailConfirmation.Outcome


class ConfirmationUnusable(Exception):
    """A link that confirms nothing: ``status`` is "unknown", "expired", "used" or "replaced"."""

    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


def _pending(now: dt.datetime) -> Q:
    return Q(outcome=Outcome.OPEN, created__gt=now - CONFIRM_TTL)


def _wait_text(seconds: float) -> str:
    minutes = max(1, math.ceil(seconds / 60))
    return f"{minutes} min" if minutes < 90 else f"{math.ceil(minutes / 60)} h"


def _closed(outcome: str, now: dt.datetime) -> dict[str, Any]:
    return {"outcome": outcome, "closed_at": now, "open_for": None}


def _address_busy(address: str, now: dt.datetime) -> ValidationError:
    other = (
        EmailConfirmation.objects.filter(open_for=address.lower()).values_list("created", flat=True).first()
    )
    wait = _wait_text(((other or now) + CONFIRM_TTL - now).total_seconds())
    return ValidationError(
        {"address": f"A confirmation mail to {address} is already waiting for an answer; one more can go once it "
         f"is answered, or in {wait}."}
    )  # fmt: skip


def _check_limits(*, address: str, by: Any, now: dt.datetime) -> None:
    """ValidationError (on ``address``) when another channel's link to ``address`` is pending, or ``by`` has
    caused ``MAILS_PER_HOUR`` confirmation mails within the hour. (The channel's own open link is closed first.)"""
    if EmailConfirmation.objects.filter(open_for=address.lower()).exists():
        raise _address_busy(address, now)
    hour = list(
        EmailConfirmation.objects.filter(requested_by=by, created__gt=now - dt.timedelta(hours=1))
        .order_by("created")
        .values_list("created", flat=True)[:MAILS_PER_HOUR]
    )
    if len(hour) >= MAILS_PER_HOUR:
        wait = _wait_text((hour[0] + dt.timedelta(hours=1) - now).total_seconds())
        raise ValidationError(
            {"address": f"That is {MAILS_PER_HOUR} confirmation mails within an hour: ask again in {wait}."}
        )


def confirmation_request(*, channel: Channel, by: Any, link_origin: Callable[[], str]) -> EmailConfirmation:
    """Ask the address of email ``channel`` to confirm (see the module's steps). Call it in the transaction that
    saved the channel: a refusal (ValidationError, also ``hub.links.NoLinkOrigin`` from ``link_origin``) then
    undoes the change with it."""
    origin = link_origin()  # first: no row and no mail for a link that could lead elsewhere
    now, address = timezone.now(), channel.address
    EmailConfirmation.objects.filter(channel=channel, outcome=Outcome.OPEN).update(
        **_closed(Outcome.REPLACED, now)
    )
    EmailConfirmation.objects.filter(open_for=address.lower(), created__lte=now - CONFIRM_TTL).update(
        **_closed(Outcome.EXPIRED, now)
    )
    _check_limits(address=address, by=by, now=now)
    try:
        with transaction.atomic():  # a savepoint: a request racing for the same address lands here
            confirmation = EmailConfirmation.objects.create(
                channel=channel,
                address=address,
                open_for=address.lower(),
                requested_by=by if getattr(by, "pk", None) else None,
            )
    except IntegrityError:
        raise _address_busy(address, now) from None
    _enqueue_mail(confirmation.pk, origin)
    return confirmation


def confirmations_cancel(*, channel: Channel) -> None:
    """The channel is going, or its address changes: its open links stop working, and stop blocking others."""
    EmailConfirmation.objects.filter(channel=channel, outcome=Outcome.OPEN).update(
        **_closed(Outcome.CANCELLED, timezone.now())
    )


def _enqueue_mail(confirmation_id: int, origin: str) -> None:
    """``notify.tasks.confirm_mail`` after commit, sent by its name (as ``notify.services._enqueue``)."""

    def send() -> None:
        current_app.signature("notify.tasks.confirm_mail", args=(confirmation_id, origin)).apply_async()

    transaction.on_commit(send, robust=True)  # a broker hiccup is logged; "resend" on the page tries again


# -- the link ------------------------------------------------------------------------------------------------
def confirmation_token(confirmation: EmailConfirmation) -> str:
    """The link's token: the row and the address it confirms, signed with SECRET_KEY (it expires with
    ``CONFIRM_TTL``; the row makes it single-use)."""
    return signing.dumps({"c": confirmation.pk, "a": confirmation.address}, salt=SALT)


def confirmation_find(token: str) -> EmailConfirmation:
    """The pending confirmation ``token`` names, or :class:`ConfirmationUnusable` saying why not."""
    try:
        data = signing.loads(token, salt=SALT, max_age=CONFIRM_TTL)
    except signing.SignatureExpired:
        raise ConfirmationUnusable("expired") from None
    except signing.BadSignature:
        raise ConfirmationUnusable("unknown") from None
    if not isinstance(data, dict) or not isinstance(data.get("c"), int):
        raise ConfirmationUnusable("unknown")
    confirmation = (
        EmailConfirmation.objects.select_related("channel", "requested_by")
        .filter(pk=data["c"], address=data.get("a"))
        .first()
    )
    if confirmation is None:
        raise ConfirmationUnusable("unknown")
    if confirmation.outcome == Outcome.CONFIRMED:
        raise ConfirmationUnusable("used")
    if confirmation.outcome == Outcome.EXPIRED or confirmation.created <= timezone.now() - CONFIRM_TTL:
        raise ConfirmationUnusable("expired")
    if (
        confirmation.outcome
        or confirmation.channel is None
        or confirmation.channel.address != confirmation.address
    ):
        raise ConfirmationUnusable("replaced")
    return confirmation


def confirmation_accept(*, token: str) -> Channel:
    """Confirm the channel ``token`` names: the link is spent and the channel's current address confirmed, in one
    transaction (ConfirmationUnusable when it can't be)."""
    with transaction.atomic():
        confirmation = confirmation_find(token)
        now = timezone.now()
        spent = EmailConfirmation.objects.filter(pk=confirmation.pk, outcome=Outcome.OPEN).update(
            **_closed(Outcome.CONFIRMED, now)
        )  # compare-and-set: of two presses racing, one confirms and the other is told "used"
        if spent != 1:
            raise ConfirmationUnusable("used")
        channel = confirmation.channel
        if not Channel.objects.filter(pk=channel.pk, address=confirmation.address).update(
            confirmed_address=confirmation.address
        ):  # the address changed in between: the spent row goes back with the transaction
            raise ConfirmationUnusable("replaced")
    channel.confirmed_address = confirmation.address
    return channel


# -- the mail ------------------------------------------------------------------------------------------------
def name_line(name: str) -> str:
    """A channel's name as one plain line for a mail body: whitespace and control characters folded into single
    spaces, so a name can't start a paragraph of its own that reads as the hub's words."""
    return " ".join("".join(c if c.isprintable() else " " for c in name).split())[:100]


def confirmation_mail_send(*, confirmation_id: int, origin: str) -> bool:
    """Send one confirmation mail (the task ``confirm_mail`` calls this). Returns whether a mail went out: none
    for a confirmation that is no longer pending, or whose mail a first run of the task already sent."""
    now = timezone.now()
    claimed = EmailConfirmation.objects.filter(
        _pending(now), pk=confirmation_id, sent_at__isnull=True
    ).update(sent_at=now)  # a task run twice sends once
    if not claimed:
        return False
    confirmation = EmailConfirmation.objects.select_related("channel", "requested_by").get(pk=confirmation_id)
    if mail_domain_blocked(confirmation.address):  # allowed when asked, no longer: the mail stays unsent
        logger.warning("confirmation %s not sent: its address is on a private network", confirmation_id)
        return False
    channel, asker = confirmation.channel, confirmation.requested_by
    context = {
        "address": confirmation.address,
        "hub_url": origin,
        "link": origin + reverse("notify-confirm", args=[confirmation_token(confirmation)]),
        "asker": asker.get_username() if asker else "an admin",
        "channel_name": name_line(channel.name) if channel else "",
        "hours": int(CONFIRM_TTL.total_seconds() // 3600),
    }
    try:
        send_mail(
            SUBJECT, render_to_string("notify/confirm_email.txt", context), None, [confirmation.address]
        )
    except Exception:
        # Not sent after all: the task's retry (or a resend) may send it.
        EmailConfirmation.objects.filter(pk=confirmation_id).update(sent_at=None)
        raise
    return True
