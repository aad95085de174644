"""A small fixed-window counter in the cache (Redis) for the signed-out account pages: accepting an
invitation and asking for a reset email. Like ``hub.ratelimit`` it fails open: the bound is a guard against
scripts, and a hub whose Redis is down should still let a person in."""

from __future__ import annotations

import hashlib
import logging
import math
import time

from django.core.cache import cache

log = logging.getLogger(__name__)


def over_limit(scope: str, key: str, limit: int, period: int) -> int:
    """Count one try of ``key`` (an address) in ``scope``. 0 when allowed, else the seconds to wait."""
    now = time.time()
    window = int(now // period)
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]  # an address never sits in Redis in clear
    cache_key = f"throttle:{scope}:{digest}:{period}:{window}"
    try:
        cache.add(cache_key, 0, timeout=period + 5)
        try:
            count = cache.incr(cache_key)
        except ValueError:  # expired between add and incr
            cache.add(cache_key, 0, timeout=period + 5)
            count = cache.incr(cache_key)
    except Exception as exc:  # noqa: BLE001 - any cache failure: fail open, but say so
        log.warning("%s throttle not enforced (cache unavailable): %s", scope, type(exc).__name__)
        return 0
    if count <= limit:
        return 0
    return max(1, math.ceil((window + 1) * period - now))
