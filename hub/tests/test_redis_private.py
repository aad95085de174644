"""Issue 34: the private Redis answers only the hub. A client without the password (any local process that
reaches the loopback port) is refused; the hub's own clients (cache, broker, channel layer) carry it in REDIS_URL;
the password is never on a command line nor printed."""

from __future__ import annotations

import stat
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings as django_settings
from django.core.cache import cache

from hub.celery import app as celery_app
from hub.env import without_password
from hub.redis_server import free_port, port_open, start_private_redis, stop_pid
from hub.testing import load_script


def _bare(url: str) -> str:
    """``url`` as a process that found the port but not the password would write it."""
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]).geturl()


def _refused(url: str) -> bool:
    client = redis.Redis.from_url(_bare(url), socket_connect_timeout=2, socket_timeout=2)
    try:
        client.set("planted", "x")
    except redis.AuthenticationError:  # redis-py's name for the server's NOAUTH answer
        return True
    finally:
        client.close()
    return False


def test_the_suites_redis_refuses_a_bare_connection_while_the_hub_works():
    assert urlsplit(django_settings.REDIS_URL).password  # the suite runs the hub's path: with a password
    assert _refused(django_settings.REDIS_URL)
    cache.set("redis-private-test", "ok", timeout=30)
    assert cache.get("redis-private-test") == "ok"
    with celery_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.send)(channel, {"type": "hub.fragment", "n": 1})
    assert async_to_sync(layer.receive)(channel)["n"] == 1


def test_the_password_is_in_a_private_file_never_on_the_command_line(tmp_path):
    server = start_private_redis(run_dir=tmp_path / "run")
    try:
        # What any local user can read of it (ps).
        assert server.password not in Path(f"/proc/{server.pid}/cmdline").read_bytes().decode(
            errors="replace"
        )
        config = server.pidfile.with_suffix(".conf")
        assert stat.S_IMODE(config.stat().st_mode) == 0o600
        assert _refused(server.url)
        assert redis.Redis.from_url(server.url).ping()
    finally:
        server.stop()


def test_make_ups_redis_asks_for_the_password_from_env(tmp_path, monkeypatch):
    up = load_script("up")
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("HUB_REDIS_PASSWORD", "pw-from-dot-env-" + "x" * 20)
    monkeypatch.setenv("HUB_REDIS_PORT", str(free_port()))
    cmd, url = up.redis_process(tmp_path)
    assert "pw-from-dot-env-" not in " ".join(cmd) and urlsplit(url).password.startswith("pw-from-dot-env-")
    assert stat.S_IMODE((tmp_path / "run" / "redis.conf").stat().st_mode) == 0o600
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    try:
        port = urlsplit(url).port
        while not port_open(port):  # not timed: the test's own timeout ends it should the server never listen
            assert server.poll() is None, "redis-server exited"
            time.sleep(0.02)
        assert _refused(url)
        assert redis.Redis.from_url(url).ping()
    finally:
        stop_pid(server.pid)
        server.wait(timeout=10)


def test_a_redis_url_that_does_not_answer_is_named_without_its_password(monkeypatch, capsys, tmp_path):
    up = load_script("up")
    monkeypatch.setenv("REDIS_URL", f"redis://:very-secret-pw@127.0.0.1:{free_port()}/0")
    with pytest.raises(SystemExit):
        up.redis_process(tmp_path)
    err = capsys.readouterr().err
    assert "very-secret-pw" not in err and "redis://:**@127.0.0.1:" in err


def test_without_password():
    assert without_password("redis://:pw@127.0.0.1:6390/0") == "redis://:**@127.0.0.1:6390/0"
    assert without_password("redis://hub:pw@redis.lan:6379/1") == "redis://hub:**@redis.lan:6379/1"
    assert without_password("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
