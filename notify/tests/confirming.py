"""Email channels whose address is confirmed, for tests about what such a channel does: through the real
confirmation (a request, its link's token, the link's button), without its mail."""

from __future__ import annotations

from django.db import transaction

from notify.confirm import confirmation_accept, confirmation_request, confirmation_token
from notify.models import Channel


def confirmed(channel: Channel) -> Channel:
    with transaction.atomic():
        confirmation = confirmation_request(
            channel=channel, by=channel.owner, link_origin=lambda: "http://hub.test"
        )
    confirmation_accept(token=confirmation_token(confirmation))
    channel.refresh_from_db()
    return channel
