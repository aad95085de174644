"""The page banner's Redis probe keeps its connection between pages (``hub.health._probe_client``): it still
says "down" the moment Redis goes away and "up" again once it is back, without a restart of the web process."""

from __future__ import annotations

from hub.health import redis_ok
from hub.redis_server import start_private_redis


def test_the_probe_follows_redis_going_away_and_coming_back(tmp_path, settings):
    server = start_private_redis(run_dir=tmp_path / "a")
    settings.REDIS_URL = server.url
    try:
        assert redis_ok() and redis_ok()  # the second probe reuses the kept connection
    finally:
        server.stop()
    assert not redis_ok()  # the kept connection is dead: the banner shows at once
    again = start_private_redis(run_dir=tmp_path / "b", port=server.port, password=server.password)
    try:
        assert redis_ok()
    finally:
        again.stop()
