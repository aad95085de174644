"""Live updates: the one way server code talks to open browsers.

Producers (tasks, services) call :func:`push` with a rendered fragment. Each fragment is a whole
element with a stable id and ``hx-swap-oob="true"``, so duplicates or out-of-order arrivals are harmless.

Groups (ASCII, < 100 chars):
- ``everyone``     every signed-in person (device cards, the queue plan)
- ``user.<id>``    one person's own jobs and notices
- ``device.<id>``  one device's gauges and running job
- ``admins``       queue control
- ``job.<id>``     one job page
- ``session.<h>``  the sockets of one signed-in browser session (``h`` is a hash of the session key)

Access is re-checked whenever it changes, not only at connect (see ``hub.consumers``):

- a fragment names the group it was sent to, and a socket that has left that group drops it;
- a fragment may name its ``audience``: identity groups (``everyone``, ``user.<id>``, ``admins``) of which the
  socket must hold one *now* — so a private job's fragments reach nobody who may no longer see it, whichever
  group they came through, even when the change happened a moment before the push;
- :func:`reauthorize` tells every socket of a group to re-check its person, session and topics (a role or an
  active flag changed), and :func:`close_group` closes them (signing out closes that session's sockets).

Topics are what a page asks to watch (``/ws/hub/?watch=device:3,job:7``). Apps register a handler
per topic kind in their ``AppConfig.ready()``; the handler checks access and returns the groups to join
and the snapshot fragments to send on connect (every (re)connect resyncs the page).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from typing import Literal, NotRequired, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.core.cache import cache

log = logging.getLogger(__name__)

EVERYONE = "everyone"
ADMINS = "admins"
WATCH_TTL_S = 75  # the page re-announces itself every 30 s; two missed beats and it's gone


class Fragment(TypedDict):
    type: Literal["hub.fragment"]
    html: str
    group: NotRequired[str]  # where it was sent: a socket that has left that group drops it
    #: identity groups allowed to see it (holding one is enough); absent: anyone in the group
    audience: NotRequired[list[str]]
    exclude: NotRequired[list[str]]  # identity groups that get their own version of it instead (e.g. admins)


class Control(TypedDict):
    type: Literal["hub.reauth", "hub.close"]


TopicHandler = Callable[[object, str], tuple[list[str], list[str]]]
_topics: dict[str, TopicHandler] = {}


def user_group(user_id: int) -> str:
    return f"user.{user_id}"


def device_group(device_id: int) -> str:
    return f"device.{device_id}"


def job_group(job_id: int) -> str:
    return f"job.{job_id}"


def session_group(session_key: str) -> str:
    """One browser session's sockets. Hashed: the session key itself never goes to Redis."""
    return "session." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


def register_topic(kind: str, handler: TopicHandler) -> None:
    """Called from AppConfig.ready(); the registry is filled once at import time and then only read."""
    _topics[kind] = handler


def topic_handler(kind: str) -> TopicHandler | None:
    return _topics.get(kind)


def push(
    group: str, html: str, *, audience: list[str] | None = None, exclude: list[str] | None = None
) -> None:
    """Send a fragment to every socket in ``group``. Never raises: a live update is best effort.

    ``audience``: the identity groups allowed to see it, checked by each socket when it arrives (private
    content: say who may see it, not only where it goes). ``exclude``: identity groups that receive a richer
    version of it separately and must not have it overwritten by this one.
    """
    message: Fragment = {"type": "hub.fragment", "html": html, "group": group}
    if audience is not None:
        message["audience"] = list(audience)
    if exclude:
        message["exclude"] = list(exclude)
    _send(group, message)


def push_many(
    groups: list[str], html: str, *, audience: list[str] | None = None, exclude: list[str] | None = None
) -> None:
    for group in dict.fromkeys(groups):
        push(group, html, audience=audience, exclude=exclude)


def reauthorize(group: str) -> None:
    """Every socket in ``group`` re-checks who it serves and what it may watch (call after commit)."""
    message: Control = {"type": "hub.reauth"}
    _send(group, message)


def close_group(group: str) -> None:
    """Close every socket in ``group`` (e.g. a session that signed out)."""
    message: Control = {"type": "hub.close"}
    _send(group, message)


def _send(group: str, message: Fragment | Control) -> None:
    try:
        async_to_sync(get_channel_layer().group_send)(group, message)
    except Exception:
        log.warning("live %s to %s failed", message["type"], group, exc_info=True)


def mark_watched(topic: str) -> None:
    """A page is showing ``topic`` right now (device pollers speed up while someone watches)."""
    try:
        cache.set(f"watch:{topic}", time.time(), timeout=WATCH_TTL_S)
    except Exception:
        log.warning("could not record a watcher for %s", topic, exc_info=True)


def is_watched(topic: str) -> bool:
    try:
        return cache.get(f"watch:{topic}") is not None
    except Exception:  # noqa: BLE001
        return False
