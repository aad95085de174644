"""Live updates: the one way server code talks to open browsers.

Producers (tasks, services) call :func:`push` with a rendered fragment. Each fragment is a whole
element with a stable id and ``hx-swap-oob="true"``, so duplicates or out-of-order arrivals are harmless.

Groups (ASCII, < 100 chars):
- ``everyone``     every signed-in person (device cards, the queue plan)
- ``user.<id>``    one person's own jobs and notices
- ``device.<id>``  one device's gauges and running job
- ``admins``       queue control
- ``job.<id>``     one job page

Topics are what a page asks to watch (``/ws/hub/?watch=device:3,job:7``). Apps register a handler
per topic kind in their ``AppConfig.ready()``; the handler checks access and returns the groups to join
and the snapshot fragments to send on connect (every (re)connect resyncs the page).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Literal, TypedDict

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


TopicHandler = Callable[[object, str], tuple[list[str], list[str]]]
_topics: dict[str, TopicHandler] = {}


def user_group(user_id: int) -> str:
    return f"user.{user_id}"


def device_group(device_id: int) -> str:
    return f"device.{device_id}"


def job_group(job_id: int) -> str:
    return f"job.{job_id}"


def register_topic(kind: str, handler: TopicHandler) -> None:
    """Called from AppConfig.ready(); the registry is filled once at import time and then only read."""
    _topics[kind] = handler


def topic_handler(kind: str) -> TopicHandler | None:
    return _topics.get(kind)


def push(group: str, html: str) -> None:
    """Send a fragment to every socket in ``group``. Never raises: a live update is best effort."""
    message: Fragment = {"type": "hub.fragment", "html": html}
    try:
        async_to_sync(get_channel_layer().group_send)(group, message)
    except Exception:
        log.warning("live push to %s failed", group, exc_info=True)


def push_many(groups: list[str], html: str) -> None:
    for group in dict.fromkeys(groups):
        push(group, html)


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
