"""A device whose link went silent (packets stop: a connect or a read waits out its deadline) is asked again once per
backoff window, by one call at a time, instead of by every task that has business with it.

Every call that waits out its deadline holds a worker slot for that long; on the small profile (one slot for every
device, hub.profile) that is every other device's dispatch, polls and downloads held too. So the first call to
time out marks the device silent; until its window ends, every call to it fails at once with ``errors.DeviceSilent``
(a ``DeviceTimeout``: the engine waits for the device as it does for any timeout, the poller shows it unreachable),
and once the window ends one call (whoever comes first) tries the link, the others still failing at once. An answer
ends the silence; another timeout doubles the window, up to ``MAX_WINDOW_S``.

A refused connection is no silence (it costs nothing to find out): only timeouts count. The mark lives in Redis
(the cache), shared by every worker; without Redis every call goes through, as before.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import time

from django.core.cache import cache
from django.utils import timezone

from devices import errors

logger = logging.getLogger("devices.silence")

FIRST_WINDOW_S = 4.0
MAX_WINDOW_S = 30.0
#: The one call that tries a silent link waits at most this long for its first byte (whatever its own deadline):
#: a try costs the worker slot a short while, and an answer ends the silence for the longer calls after it.
TRY_DEADLINE_S = 5.0
#: Calls whose own deadline is longer than this (renders that answer when done, streams) never try a silent link.
LONGEST_TRY_S = 30.0
KEEP_S = 24 * 3600  # a mark nobody renewed in a day is forgotten


def _link(device_id: int, base_url: str) -> str:
    """One device at one address: a device given another address starts with a clean link."""
    return f"{device_id}:{hashlib.sha256(base_url.encode()).hexdigest()[:12]}"


def _key(link: str) -> str:
    return f"devices:silent:{link}"


def _try_key(link: str) -> str:
    return f"devices:silent-try:{link}"


def window_s(misses: int) -> float:
    """The wait before the link is tried again after ``misses`` timeouts in a row: 4, 8, 16, 30, 30… s."""
    return min(FIRST_WINDOW_S * 2 ** max(misses - 1, 0), MAX_WINDOW_S)


def _clock(unix: float) -> str:
    """``21:03`` in the hub's time zone."""
    return timezone.localtime(dt.datetime.fromtimestamp(unix, tz=dt.UTC)).strftime("%H:%M")


def silence_of(device_id: int, base_url: str) -> dict | None:
    """``{"since", "until", "misses"}`` (unix seconds) while the device at ``base_url`` is silent, else None."""
    return _mark(_link(device_id, base_url))


def _mark(link: str) -> dict | None:
    try:
        mark = cache.get(_key(link))
    except Exception:  # noqa: BLE001 - no Redis: no gate
        return None
    return mark if isinstance(mark, dict) else None


class LinkGate:
    """The client's hook (``HttpDevice.link``) for one device: ``before`` each request, then ``answered`` or
    ``timed_out``."""

    def __init__(self, device_id: int, base_url: str) -> None:
        self.device_id = device_id
        self.link = _link(device_id, base_url)

    def before(self, read: float) -> float | None:
        """Raise ``DeviceSilent`` while the device's window runs, or while another call tries the link; the
        deadline of a call that tries the link (None: the call's own). A call that waits long for its answer by
        design (a blocking render, a stream: ``read`` over ``LONGEST_TRY_S``) never tries the link: cut short, the
        device would have started a render the hub no longer hears of. A short call (the poller's) tries it."""
        mark = _mark(self.link)
        if mark is None:
            return None
        now = time.time()
        since = _clock(mark["since"])
        if now < mark["until"]:
            raise errors.DeviceSilent(
                f"No answer since {since}.", detail=f"trying again in {mark['until'] - now:.0f}s"
            )
        if read > LONGEST_TRY_S:
            raise errors.DeviceSilent(f"No answer since {since}.", detail="a short call tries the link first")
        try:
            mine = cache.add(_try_key(self.link), 1, timeout=max(int(MAX_WINDOW_S), 1))
        except Exception:  # noqa: BLE001
            return None
        if not mine:
            raise errors.DeviceSilent(f"No answer since {since}.", detail="another call is trying the link")
        return TRY_DEADLINE_S

    def answered(self) -> None:
        """An answer came (or the connection was refused or broke: packets flow): the silence is over."""
        try:
            if cache.get(_key(self.link)) is not None:
                cache.delete_many([_key(self.link), _try_key(self.link)])
                logger.info("device %s answers again", self.device_id)
        except Exception:  # noqa: BLE001
            pass

    def timed_out(self) -> None:
        now = time.time()
        mark = _mark(self.link) or {"since": now, "misses": 0}
        misses = int(mark.get("misses", 0)) + 1
        mark = {"since": mark["since"], "misses": misses, "until": now + window_s(misses)}
        try:
            cache.set(_key(self.link), mark, timeout=KEEP_S)
            cache.delete(_try_key(self.link))
        except Exception:  # noqa: BLE001
            return
        logger.info(
            "device %s silent (%d timeouts in a row); next try in %.0fs",
            self.device_id,
            misses,
            window_s(misses),
        )
