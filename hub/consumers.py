"""The one websocket consumer: a thin pipe from channel-layer groups to a page.

Auth happens in ``connect``; commands arrive through ordinary views, never through the socket. The
only message a page sends is a periodic ``{"watching": true}`` heartbeat (htmx ws-send), which keeps
the watched topics marked so device pollers run at their fast rate.
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied

from hub import live, metrics

log = logging.getLogger(__name__)
MAX_TOPICS = 20


class HubConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close()  # before accept(): the handshake is refused with 403
            return
        self.topics = _parse_topics(self.scope.get("query_string", b""))
        groups, snapshot = await self._subscribe(user)
        self.joined = groups
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        await metrics.ws_opened(self)
        for html in snapshot:
            await self.send(text_data=html)

    async def disconnect(self, code):
        await metrics.ws_closed(self)
        for group in getattr(self, "joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        # Heartbeat only; anything else is ignored (commands go through views with CSRF).
        await database_sync_to_async(self._mark_watched)()

    async def hub_fragment(self, event: live.Fragment):
        await self.send(text_data=event["html"])

    @database_sync_to_async
    def _subscribe(self, user) -> tuple[list[str], list[str]]:
        groups = [live.EVERYONE, live.user_group(user.pk)]
        if getattr(user, "is_admin", False):
            groups.append(live.ADMINS)
        snapshot: list[str] = []
        allowed: list[str] = []
        for kind, object_id in self.topics:
            handler = live.topic_handler(kind)
            if handler is None:
                continue
            try:
                topic_groups, fragments = handler(user, object_id)
            except (PermissionDenied, ObjectDoesNotExist, ValueError):
                log.info("user %s may not watch %s:%s", user.pk, kind, object_id)
                continue
            groups.extend(topic_groups)
            snapshot.extend(fragments)
            allowed.append(f"{kind}:{object_id}")
        self.allowed_topics = allowed
        self._mark_watched()
        return list(dict.fromkeys(groups)), snapshot

    def _mark_watched(self):
        for topic in getattr(self, "allowed_topics", []):
            live.mark_watched(topic)


def _parse_topics(query_string: bytes) -> list[tuple[str, str]]:
    values = parse_qs(query_string.decode("ascii", "ignore")).get("watch", [])
    topics: list[tuple[str, str]] = []
    for value in values:
        for item in value.split(","):
            kind, sep, object_id = item.strip().partition(":")
            if sep and kind.isidentifier() and object_id.isdigit():
                topics.append((kind, object_id))
    return topics[:MAX_TOPICS]
