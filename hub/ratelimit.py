"""Rate limits per caller: submissions through the API doors (/api/ and /v1/, per token) and the summaries under
the new-job form (per person).

A fixed-window counter in Redis (Django's cache): one key per kind, caller and window, incremented
atomically, expiring with the window. A fixed window lets a caller spend two windows' worth back to back
at a boundary; for a household hub whose real bottleneck is one device that is fine, and it costs a
single INCR per request. The limits are ``HUB_API_SUBMIT_RATE`` and ``HUB_PREVIEW_RATE``: ``N/s``, ``N/m`` or
``N/h``; ``0`` turns one off (parsed by ``hub.env.parse_rate``).
"""

from __future__ import annotations

import logging
import math
import time
from functools import lru_cache

from django.conf import settings
from django.core.cache import cache
from ninja.errors import HttpError

from hub.env import parse_rate

log = logging.getLogger(__name__)


def _clock() -> float:
    return time.time()  # a seam of its own, so tests can hold the clock without patching time.time everywhere


@lru_cache(maxsize=32)
def _rate(value: str, name: str) -> tuple[int, int] | None:
    return parse_rate(value, name=name)


def submit_allowed(key: str) -> int | None:
    """Count one submission for ``key``. None when allowed, else the seconds until the next slot."""
    return _allowed("submit", key, getattr(settings, "HUB_API_SUBMIT_RATE", "30/m"), "HUB_API_SUBMIT_RATE")


def preview_allowed(key: str) -> int | None:
    """Count one summary of the new-job form for ``key``. None when allowed, else the seconds until the next slot.

    Each summary decodes the form's uploads (six at once took a web worker from 155 to 704 MB)."""
    return _allowed("preview", key, getattr(settings, "HUB_PREVIEW_RATE", "2/s"), "HUB_PREVIEW_RATE")


def share_password_allowed(key: str) -> int | None:
    """Count one password tried on a share link (``key``: the link). None when allowed, else the seconds until the
    next try. Counted per link, whoever tries: guessing one link's password from many addresses is no faster."""
    return _allowed(
        "share-password", key, getattr(settings, "HUB_SHARE_PASSWORD_RATE", "5/m"), "HUB_SHARE_PASSWORD_RATE"
    )


def _allowed(kind: str, key: str, setting: str, name: str) -> int | None:
    """Count one request of ``kind`` for ``key`` against the rate ``setting``.

    Fails open (allows, and logs) when Redis is unreachable: the limit is about fairness, and a
    request that needs Redis will report that problem itself.
    """
    rate = _rate(setting, name)
    if rate is None:
        return None
    limit, period = rate
    now = _clock()
    window = int(now // period)
    cache_key = f"ratelimit:{kind}:{key}:{period}:{window}"
    try:
        # add() only creates the counter when it is missing; the slack keeps it alive past the window's end.
        cache.add(cache_key, 0, timeout=period + 5)
        try:
            count = cache.incr(cache_key)
        except ValueError:  # expired between add and incr; start again
            cache.add(cache_key, 0, timeout=period + 5)
            count = cache.incr(cache_key)
    except Exception as exc:  # noqa: BLE001 - any cache failure: fail open, but say so
        log.warning("rate limit not enforced (cache unavailable): %s", type(exc).__name__)
        return None
    if count <= limit:
        return None
    return max(1, math.ceil((window + 1) * period - now))


class RateLimited(HttpError):
    """Too many submissions. An HttpError, so ninja answers 429 ``{"detail": …}`` even without a handler;
    add ``Retry-After: exc.retry_after`` where you translate it."""

    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after
        super().__init__(429, f"Too many submissions; try again in {retry_after} s.")


def rate_key(request) -> str:
    token = getattr(request, "api_token", None)
    if token is not None:
        # The hash, not the row id: ids come back after a database is reset, a token's hash never does.
        return f"token:{token.key_hash[:16]}"
    return f"user:{request.user.pk}"


def check_submit(request) -> None:
    """Raise RateLimited when the caller (its token, or the session's person) is over the submit rate."""
    retry_after = submit_allowed(rate_key(request))
    if retry_after is not None:
        raise RateLimited(retry_after)
