"""Live updates: the one way server code talks to open browsers.

Producers call :func:`push` with a rendered fragment: a whole element with a stable id and
``hx-swap-oob="true"``, so duplicates or out-of-order arrivals are harmless. (Job and queue fragments come only
from ``jobs.live.broadcast``, which only the jobs outbox calls, after commit: ``jobs.live.outbox``.)

**Topics** are what a page asks to watch (``/ws/hub/?watch=device:3,queue:3,job:7``): exactly the elements it
shows, so every fragment that reaches it has a target. Each topic kind names a fixed set of elements, and
every page that shows one of them shows them all:

- ``job:<id>``      the job page: status, events, result, actions, header badge
- ``plan:<dev>``    the running-now card and the queue plan (per person: others' private jobs without prompt)
- ``queue:<dev>``   the queue page: the same, and for admins also their queue controls
- ``device:<dev>``  the device card and its gauges (dashboard, device page)
- ``card:<dev>``    the device card alone (device list)
- ``mine:<user>``   the dashboard's "my recent jobs" list (your own id only)
- ``wire:<user>``   the dashboard's live-wire check (admins, their own id only)
- ``album:<id>``    an album's page: the notice that results were added (its people only)

Fragments go only to topic groups (``job.<id>``, ``queue.<dev>`` for the plan, ``control.<dev>`` for the
controls, ``device.<dev>``, ``card.<dev>``, ``mine.<user>``, ``wire.<user>``; :func:`topic_group`). Apps register a handler per kind in their ``AppConfig.ready()``; the handler checks access and
returns the groups to join and the snapshot fragments to send on (re)connect.

**Identity groups** (``everyone``, ``user.<id>``, ``admins``, ``submitters``, ``session.<h>``) say who a
socket serves. They carry control messages (:func:`reauthorize`, :func:`close_group`), never fragments, and
a fragment's ``audience`` names the identity groups of which the socket must hold one *now* (see
``hub.consumers``: access is re-checked whenever it changes).

**Quiet**: :func:`push` remembers the last HTML it sent per group and element (a digest in Redis, short TTL)
and skips an identical one; with ``every`` it also sends an element at most once per that many seconds
(progress ticks). A socket joining a group resets that memory (:func:`forget_sent`), so nothing it needs is
skipped as "already sent" (it got the snapshot; the next change reaches everyone).
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable, Iterable
from typing import Literal, NotRequired, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.cache import cache

log = logging.getLogger(__name__)

EVERYONE = "everyone"
ADMINS = "admins"
SUBMITTERS = "submitters"  # people who may queue jobs (members and admins): e.g. "Run again" in a job's box
WATCH_TTL_S = 75  # the page re-announces itself every 30 s; two missed beats and it's gone
SENT_TTL_S = 120  # how long the last-sent digests of a group are kept after its last push
TICK_EVERY_S = 0.9  # progress ticks: about one per second per element at most


class Fragment(TypedDict):
    type: Literal["hub.fragment"]
    html: str
    group: NotRequired[str]  # where it was sent: a socket that has left that group drops it
    #: identity groups allowed to see it (holding one is enough); absent: anyone in the group
    audience: NotRequired[list[str]]
    exclude: NotRequired[list[str]]  # identity groups that get their own version of it instead (e.g. admins)
    #: one of several versions of an element for different people: not being in this one's audience says
    #: nothing about access (the socket drops it quietly instead of re-checking its topics)
    variant: NotRequired[bool]


class Control(TypedDict):
    type: Literal["hub.reauth", "hub.close"]


TopicHandler = Callable[[object, str], tuple[list[str], list[str]]]
_topics: dict[str, TopicHandler] = {}


def user_group(user_id: int) -> str:
    return f"user.{user_id}"


def topic_group(topic: str) -> str:
    """``job:7`` -> ``job.7``: the channel-layer group of a topic (ASCII, short)."""
    kind, _, object_id = topic.partition(":")
    return f"{kind}.{object_id}"


def job_group(job_id: int) -> str:
    return topic_group(f"job:{job_id}")


def device_group(device_id: int) -> str:
    """The device card and gauges (``device:<id>``)."""
    return topic_group(f"device:{device_id}")


def card_group(device_id: int) -> str:
    """The device card alone (``card:<id>``, the device list)."""
    return topic_group(f"card:{device_id}")


def queue_group(device_id: int) -> str:
    return topic_group(f"queue:{device_id}")


def control_group(device_id: int) -> str:
    return topic_group(f"control:{device_id}")


def mine_group(user_id: int) -> str:
    return topic_group(f"mine:{user_id}")


def wire_group(user_id: int) -> str:
    return topic_group(f"wire:{user_id}")


def session_group(session_key: str) -> str:
    """One browser session's sockets. Hashed: the session key itself never goes to Redis."""
    return "session." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


def register_topic(kind: str, handler: TopicHandler) -> None:
    """Called from AppConfig.ready(); the registry is filled once at import time and then only read."""
    _topics[kind] = handler


def topic_handler(kind: str) -> TopicHandler | None:
    return _topics.get(kind)


def wire_topic(user: object, object_id: str) -> tuple[list[str], list[str]]:
    """``watch=wire:<user id>``: the dashboard's live-wire check (an admin's card) answers only its own person
    (no snapshot); nobody else's socket ever receives it."""
    from django.core.exceptions import PermissionDenied

    if not getattr(user, "is_admin", False) or str(getattr(user, "pk", "")) != object_id:
        raise PermissionDenied
    return [wire_group(user.pk)], []


def push(
    group: str,
    html: str,
    *,
    audience: list[str] | None = None,
    exclude: list[str] | None = None,
    every: float = 0.0,
    variant: bool = False,
) -> bool:
    """Send a fragment to every socket in ``group`` unless it would change nothing. Never raises.

    ``audience``: the identity groups allowed to see it, checked by each socket when it arrives (private
    content: say who may see it, not only where it goes). ``exclude``: identity groups that receive a richer
    version of it separately and must not have it overwritten by this one (``variant``: one of those
    versions; see :class:`Fragment`). ``every``: send this element at
    most once per that many seconds (a skipped tick is harmless: the next one carries the newer state).
    True when it was sent.
    """
    if not _changed(group, html, audience, exclude, every):
        return False
    message: Fragment = {"type": "hub.fragment", "html": html, "group": group}
    if audience is not None:
        message["audience"] = list(audience)
    if exclude:
        message["exclude"] = list(exclude)
    if variant:
        message["variant"] = True
    _send(group, message)
    return True


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


# -- what was sent last: skip identical fragments, throttle ticks --------------------------------------------
_ELEMENT_ID = re.compile(r"""<[a-zA-Z][^>]*?\sid=["']([^"']+)["']""")
#: Compare-and-set in one round trip: 0 = skip (same digest, or a tick too soon), 1 = recorded, send it.
_CAS = """
local prev = redis.call('HGET', KEYS[1], ARGV[1])
if prev then
  local sep = string.find(prev, ' ', 1, true)
  if string.sub(prev, 1, sep - 1) == ARGV[2] then return 0 end
  local every = tonumber(ARGV[4])
  if every > 0 and tonumber(ARGV[3]) - tonumber(string.sub(prev, sep + 1)) < every then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ' ' .. ARGV[3])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
return 1
"""
_redis_state: dict[str, object] = {}


def _script():
    """The CAS script on a client of its own (``REDIS_URL``; one pool per process, rebuilt after a fork)."""
    import os

    import redis

    if _redis_state.get("pid") != os.getpid():
        client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=2)
        _redis_state.update(pid=os.getpid(), client=client, script=client.register_script(_CAS))
    return _redis_state["script"]


def _sent_key(group: str) -> str:
    return f"hub:live:sent:{group}"


def element_id(html: str) -> str | None:
    """The id of a fragment's outermost element."""
    match = _ELEMENT_ID.search(html)
    return match.group(1) if match else None


def _changed(group: str, html: str, audience, exclude, every: float) -> bool:
    """True when this fragment differs from what ``group`` got last for the same element and audience."""
    element = element_id(html)
    if element is None:
        return True
    variant = "|".join(sorted(audience or ())) + "/" + "|".join(sorted(exclude or ()))
    field = f"{element}:{hashlib.blake2b(variant.encode(), digest_size=6).hexdigest()}"
    digest = hashlib.blake2b(html.encode(), digest_size=12).hexdigest()
    try:
        return bool(
            _script()(keys=[_sent_key(group)], args=[field, digest, f"{time.time():.3f}", every, SENT_TTL_S])
        )
    except Exception:
        log.debug("live dedup unavailable for %s", group, exc_info=True)
        return True


def forget_sent(groups: Iterable[str]) -> None:
    """A socket joined ``groups``: the next fragment of each element goes out even if identical to the last."""
    keys = [_sent_key(g) for g in groups]
    if not keys:
        return
    try:
        _script().registered_client.delete(*keys)
    except Exception:
        log.debug("could not reset live dedup for %s", keys, exc_info=True)


# -- who is watching ---------------------------------------------------------------------------------------
def watch_key(topic: str) -> str:
    """The cache key that says a page shows ``topic`` (set by ``mark_watched``, read by ``is_watched``/``watched``)."""
    return f"watch:{topic}"


def mark_watched(topic: str) -> None:
    """A page is showing ``topic`` right now (device pollers speed up while someone watches)."""
    try:
        cache.set(watch_key(topic), time.time(), timeout=WATCH_TTL_S)
    except Exception:
        log.warning("could not record a watcher for %s", topic, exc_info=True)


def is_watched(topic: str) -> bool:
    try:
        return cache.get(watch_key(topic)) is not None
    except Exception:  # noqa: BLE001
        return False


def watched(topics: Iterable[str]) -> set[str]:
    """Which of ``topics`` some open page shows (one round trip). On a cache failure: all of them."""
    topics = list(dict.fromkeys(topics))
    try:
        found = cache.get_many([watch_key(t) for t in topics])
    except Exception:  # noqa: BLE001
        return set(topics)
    return {t for t in topics if watch_key(t) in found}
