"""Django's Redis cache with one connection pool per server and process, not one per request.

Django keeps its cache objects per *context* (``asgiref.local.Local``), and under ASGI every request has a
context of its own: each request made a new ``RedisCache``, with a new connection pool and so a new TCP
connection to Redis, left for the garbage collector to close. Measured in-process on a kept page (one cache
read: ``hub.pagecache.generation``), the request's synchronous part took 3.8 ms with a connection of its own
against 1.5 ms with a pooled one. Here the pools are the process's: every cache object of the same server and
options shares one (redis-py's pool is thread-safe and starts afresh after a fork).

Values are stored as JSON (``JsonSerializer``), never pickled: reading a pickle runs whatever code its writer
chose, so anything that could write to Redis could run code in every web process and worker that read the key.
"""

from __future__ import annotations

import json
import threading

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient as DjangoRedisCacheClient

_pools: dict[tuple, object] = {}
_lock = threading.Lock()


def _shared_pool(server: str, pool_class, options: dict):
    """The process's pool for ``server`` with these options, made on first use."""
    key = (server, pool_class, tuple(sorted((k, repr(v)) for k, v in options.items())))
    with _lock:
        if key not in _pools:
            _pools[key] = pool_class.from_url(server, **options)
        return _pools[key]


class JsonSerializer:
    """The cache's values as JSON: strings, numbers, booleans, None, lists and dicts with string keys.

    A tuple comes back a list, and a dict's keys come back strings; a caller that keeps other types converts
    them itself (``hub.metrics._spans_before``). Integers stay Redis integers, as with Django's serializer, so
    ``incr`` counts atomically in Redis. A value that is not JSON (a pickle planted by a process that reached
    Redis) raises ``ValueError`` when read: never run, never returned.
    """

    def dumps(self, obj) -> int | bytes:
        if type(obj) is int:  # not bool: True stays JSON ``true``
            return obj
        return json.dumps(obj, separators=(",", ":")).encode()

    def loads(self, data: bytes):
        try:
            return int(data)
        except ValueError:
            pass
        try:
            return json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError("a cache value that is not JSON was refused") from exc


class RedisCacheClient(DjangoRedisCacheClient):
    def _get_connection_pool(self, write):
        # Django's, but the pool it keeps for each server is the process's, looked up once per client.
        index = self._get_connection_pool_index(write)
        if index not in self._pools:
            self._pools[index] = _shared_pool(self._servers[index], self._pool_class, self._pool_options)
        return self._pools[index]


class RedisCache(DjangoRedisCache):
    """``django.core.cache.backends.redis.RedisCache``, its connections pooled per process (see above)."""

    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = RedisCacheClient
