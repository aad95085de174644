"""The web server's channel layer outlives a Redis restart: the connections it pooled before are dead, and the
first command on each must be sent again on a new connection, not fail. It did fail: the next page to open a
websocket got a 500 on the handshake (its group_add met a pooled connection to the Redis that had gone)."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from channels_redis.core import RedisChannelLayer
from django.conf import settings as django_settings

from hub.redis_server import start_private_redis


def _layer(url: str) -> RedisChannelLayer:
    config = dict(django_settings.CHANNEL_LAYERS["default"]["CONFIG"])
    config["hosts"] = [{**config["hosts"][0], "address": url}]
    return RedisChannelLayer(**config)


def test_a_socket_joins_its_groups_again_after_redis_restarts(tmp_path):
    servers = [start_private_redis(run_dir=tmp_path / "a")]
    layer = _layer(servers[0].url)

    async def join_and_send(n: int) -> dict:
        channel = await layer.new_channel()
        await layer.group_add("watchers", channel)
        await layer.group_send("watchers", {"type": "hub.fragment", "n": n})
        return await layer.receive(channel)

    async def night() -> None:  # one event loop, as in a web process: the layer's pool is per loop
        assert (await join_and_send(1))["n"] == 1  # the pool now holds connections
        servers[0].stop()
        servers.append(
            start_private_redis(run_dir=tmp_path / "b", port=servers[0].port, password=servers[0].password)
        )
        assert (await join_and_send(2))["n"] == 2
        await layer.flush()

    try:
        async_to_sync(night)()
    finally:
        servers[-1].stop()


def test_the_cache_answers_again_after_redis_restarts(tmp_path):
    """The cache (sign-in throttling, rate limits, who watches what) needs no setting for it: redis-py's
    synchronous pool checks each connection as it hands it out. Kept so a change of client or pool that loses
    that is caught."""
    from django.core.cache.backends.redis import RedisCache

    servers = [start_private_redis(run_dir=tmp_path / "a")]
    options = django_settings.CACHES["default"]
    cache = RedisCache(servers[0].url, {"OPTIONS": options["OPTIONS"], "KEY_PREFIX": "t"})
    try:
        cache.set("k", 1)
        assert cache.get("k") == 1  # the pool now holds a connection
        servers[0].stop()
        servers.append(
            start_private_redis(run_dir=tmp_path / "b", port=servers[0].port, password=servers[0].password)
        )
        assert cache.get("k") is None  # a new, empty Redis: asked, not failed
        cache.set("k", 2)
        assert cache.get("k") == 2
    finally:
        servers[-1].stop()
