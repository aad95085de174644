"""Device request errors, counted where the device clients make them, for ``/metrics`` (``hub.metrics``).

Several web and worker processes talk to the devices, so the count is kept in Redis (a hash
``"<base_url>\t<ErrorClass>" -> count``), written by whichever process saw the error and read at scrape time.
A counter must never hold up a device call: short timeouts, and an unreachable Redis only loses the count.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import redis
from django.conf import settings

from devices.errors import DeviceError

log = logging.getLogger(__name__)

DEVICE_ERRORS_KEY = "hub:metrics:device_errors"  # hash: "<base_url>\t<ErrorClass>" -> count


@functools.cache
def _redis_for(url: str) -> redis.Redis:
    # One pool per URL and process; short timeouts, because a counter must never hold up a device call.
    return redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=1)


def note_device_error(base_url: str, exc: DeviceError) -> None:
    """Count one typed error a device client produced (once per exception object, whoever sees it twice)."""
    if getattr(exc, "_hub_metrics_counted", False):
        return
    exc._hub_metrics_counted = True  # type: ignore[attr-defined]
    try:
        _redis_for(settings.REDIS_URL).hincrby(DEVICE_ERRORS_KEY, f"{base_url}\t{type(exc).__name__}", 1)
    except redis.RedisError:
        log.debug("device error not counted: Redis unreachable")


def count_device_errors(cls: type, **kwargs: Any) -> None:
    """``HttpDevice.__init_subclass__``: count every typed error the client's error mapping produces.

    The two mappings are where HTTP becomes a typed error: ``_raise_for`` (statuses and envelopes: locked,
    auth, busy, …) raises, ``_transport_error`` (refused, timeout, broken connection) returns. Wrapping them
    once per client class counts each failed device request without touching the protocol code.
    """
    for name in ("_raise_for", "_transport_error"):
        method = getattr(cls, name, None)
        if method is not None and not getattr(method, "_hub_counts_errors", False):
            setattr(cls, name, _counting(method))


def _counting(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            result = method(self, *args, **kwargs)
        except DeviceError as exc:
            note_device_error(self.base_url, exc)
            raise
        if isinstance(result, DeviceError):
            note_device_error(self.base_url, result)
        return result

    wrapper._hub_counts_errors = True  # type: ignore[attr-defined]
    return wrapper
