"""The one websocket consumer: a thin pipe from channel-layer groups to a page.

Auth happens in ``connect`` and again whenever it may have changed; commands arrive through ordinary views,
never through the socket. The only message a page sends is a periodic ``{"watching": true}`` heartbeat
(htmx ws-send), which keeps the watched topics marked so device pollers run at their fast rate.

What a socket may see is re-checked, not remembered from the handshake (see ``hub.live``):

- **Topic groups** carry the fragments: a page names the topics it shows in its URL (``?watch=job:7``) and
  joins only those groups, so every fragment it receives has a target on the page. Joining a group resets
  the group's "already sent" memory (``hub.live.forget_sent``): the page got the snapshot, and the next
  change reaches it even when another page got that same fragment a moment ago.
- **Identity groups** (``everyone``, ``user.<id>``, ``admins`` for admins, ``submitters`` for people who may
  queue jobs, ``session.<h>``) say who the socket serves; they carry control messages, not fragments. A ``hub.reauth`` control message (sent to ``user.<id>`` when a role or an active flag
  changes) makes it reload its person and session and recompute every group: it leaves what it may no longer
  watch (a demoted admin leaves ``admins`` at once), joins what it now may, and closes when the person is
  inactive or the session is gone. ``hub.close`` (to ``session.<h>`` on sign-out, ``user.<id>`` on
  deactivation) closes it outright.
- **Every push** is checked on arrival: a fragment from a group the socket has left is dropped, and a
  fragment with an ``audience`` reaches the page only while the socket holds one of those identity groups.
  A private fragment refused through a topic group (a job made private while a member watched it) makes the
  socket re-check its topics at once, so it also stops receiving that group's traffic.
- The heartbeat re-reads the person and session too (two small queries every 30 s), the safety net for any
  change that did not send a control message (an edit in the admin site, a password change elsewhere).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied

from hub import live, metrics
from hub.accounts.sessions import session_user

log = logging.getLogger(__name__)
MAX_TOPICS = 40  # a dashboard watches three topics per device plus two
#: Close code for "you may no longer watch": not one htmx's ws extension reconnects on (1006/1012/1013).
CLOSE_NOT_ALLOWED = 4403


@dataclass
class Access:
    """What one socket may watch right now, as computed from the database."""

    identity: frozenset[str]
    topic_groups: dict[str, list[str]] = field(default_factory=dict)  # "job:7" -> ["job.7"]
    snapshots: dict[str, list[str]] = field(default_factory=dict)  # "job:7" -> its current fragments

    @property
    def groups(self) -> set[str]:
        return set(self.identity).union(*self.topic_groups.values())


class HubConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated or _must_change_password(user):
            # Before accept(): the handshake is refused with 403. Someone signed in with a one-time password
            # sees no page but the password page (MustChangePasswordMiddleware), so no live parts either.
            await self.close()
            return
        self.user_id = user.pk
        # Tests may drive the bare consumer with only a user in the scope; browsers always bring a session.
        self.session_key = getattr(self.scope.get("session"), "session_key", None) or ""
        self.topics = _parse_topics(self.scope.get("query_string", b""))
        self.joined: set[str] = set()
        self.shut = False
        access = await database_sync_to_async(self._access)(user)
        await self._apply(access)
        await self.accept()
        await metrics.ws_opened(self)
        for fragments in access.snapshots.values():
            for html in fragments:
                await self.send(text_data=html)

    async def disconnect(self, code):
        await metrics.ws_closed(self)
        await self._leave_all()

    async def receive(self, text_data=None, bytes_data=None):
        # Heartbeat only; anything else is ignored (commands go through views with CSRF).
        if self.shut:
            return
        user = await database_sync_to_async(self._current_user)()
        if user is None:
            await self._shut()
            return
        if _identity(user, self.session_key) != self.identity:
            await self._reauthorize()
        await database_sync_to_async(self._mark_watched)()

    # -- messages from the channel layer ---------------------------------------------------------------
    async def hub_fragment(self, event: live.Fragment):
        group = event.get("group")
        if group is not None and group not in self.joined:
            return  # sent before this socket left the group
        if self.identity.intersection(event.get("exclude") or ()):
            return  # this socket gets its own version of the element (e.g. an admin's device card)
        audience = event.get("audience")
        if audience is not None and not self.identity.intersection(audience):
            if group is not None and group not in self.identity and not event.get("variant"):
                # A topic group carried something this socket may no longer see: re-check its topics now.
                await self._reauthorize()
            return
        await self.send(text_data=event["html"])

    async def hub_reauth(self, event: live.Control):
        await self._reauthorize()

    async def hub_close(self, event: live.Control):
        await self._shut()

    # -- access ----------------------------------------------------------------------------------------
    async def _reauthorize(self) -> None:
        """Reload the person and the session, recompute every group; close when they are gone."""
        if self.shut:
            return  # closed already: never join a group again
        user = await database_sync_to_async(self._current_user)()
        if user is None:
            await self._shut()
            return
        before_identity, before_topics = self.identity, set(self.allowed_topics)
        access = await database_sync_to_async(self._access)(user)
        await self._apply(access)
        role_changed = access.identity != before_identity
        for topic, fragments in access.snapshots.items():
            # A new role re-renders every element for it (e.g. a device card without the admin's details);
            # otherwise only topics that just became visible need their snapshot.
            if role_changed or topic not in before_topics:
                for html in fragments:
                    await self.send(text_data=html)
        if role_changed or before_topics != set(self.allowed_topics):
            log.info("socket of user %s re-authorized: topics %s", self.user_id, self.allowed_topics)

    def _current_user(self) -> Any | None:
        """The person this socket serves, still active and still signed in to the same session, or None (also
        while they must replace a one-time password: the pages show them nothing else)."""
        from django.contrib.auth import get_user_model

        if not self.session_key:
            user = get_user_model().objects.filter(pk=self.user_id, is_active=True).first()
        else:
            user = session_user(self.session_key, self.user_id)
        return None if user is None or _must_change_password(user) else user

    def _access(self, user: Any) -> Access:
        access = Access(identity=_identity(user, self.session_key))
        for kind, object_id in self.topics:
            handler = live.topic_handler(kind)
            if handler is None:
                continue
            topic = f"{kind}:{object_id}"
            try:
                groups, fragments = handler(user, object_id)
            except (PermissionDenied, ObjectDoesNotExist, ValueError):
                log.info("user %s may not watch %s", user.pk, topic)
                continue
            access.topic_groups[topic] = list(groups)
            access.snapshots[topic] = list(fragments)
        self.allowed_topics = list(access.topic_groups)
        self._mark_watched()
        return access

    async def _apply(self, access: Access) -> None:
        wanted = access.groups
        for group in sorted(self.joined - wanted):
            await self.channel_layer.group_discard(group, self.channel_name)
        joining = wanted - self.joined
        for group in sorted(joining):
            await self.channel_layer.group_add(group, self.channel_name)
        if topic_joins := joining - access.identity:
            await database_sync_to_async(live.forget_sent)(sorted(topic_joins))
        self.joined = wanted
        self.identity = access.identity

    async def _leave_all(self) -> None:
        for group in getattr(self, "joined", ()):
            await self.channel_layer.group_discard(group, self.channel_name)
        self.joined = set()

    async def _shut(self) -> None:
        """Leave every group first (nothing more reaches this socket), then close it."""
        if self.shut:
            return
        self.shut = True
        await self._leave_all()
        await metrics.ws_closed(self)  # idempotent: the disconnect that follows counts it once
        self.identity = frozenset()
        self.allowed_topics = []
        await self.close(code=CLOSE_NOT_ALLOWED)

    def _mark_watched(self):
        for topic in getattr(self, "allowed_topics", []):
            live.mark_watched(topic)


def _must_change_password(user: Any) -> bool:
    return bool(getattr(user, "must_change_password", False))


def _identity(user: Any, session_key: str) -> frozenset[str]:
    groups = {live.EVERYONE, live.user_group(user.pk)}
    if getattr(user, "is_admin", False):
        groups.add(live.ADMINS)
    if getattr(user, "can_submit", False):
        groups.add(live.SUBMITTERS)
    if session_key:
        groups.add(live.session_group(session_key))
    return frozenset(groups)


def _parse_topics(query_string: bytes) -> list[tuple[str, str]]:
    values = parse_qs(query_string.decode("ascii", "ignore")).get("watch", [])
    topics: list[tuple[str, str]] = []
    for value in values:
        for item in value.split(","):
            kind, sep, object_id = item.strip().partition(":")
            # ASCII digits only, and short: "²".isdigit() is true and huge numbers make int() raise.
            if (
                sep
                and kind.isidentifier()
                and object_id.isascii()
                and object_id.isdigit()
                and len(object_id) <= 18
            ):
                topics.append((kind, object_id))
    return topics[:MAX_TOPICS]
