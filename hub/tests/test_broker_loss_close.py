"""A worker that loses Redis while its task channel waits in BRPOP holding a message must not crash
(``hub.celery.close_redis_channels_despite_a_dead_brpop``).

Celery 5.7's steps on a lost broker, on kombu's own objects and a Redis of this test's own (SIGKILLed here; the
session's Redis is not touched): a task channel with an unacknowledged message and a BRPOP in flight, a second
channel consuming an auto-delete fanout queue (the worker's remote control), then ``collect()`` and
``close()``. Without the fix ``close()`` raised AttributeError ('NoneType' object has no attribute 'hostname'),
which stopped the worker ("Unrecoverable error").
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from kombu import Connection, Consumer, Exchange, Queue

from hub.redis_server import port_open, start_private_redis


@pytest.fixture
def doomed_redis(tmp_path):
    redis = start_private_redis(run_dir=tmp_path / "run")
    yield redis
    redis.stop()


def test_closing_after_the_broker_died_mid_brpop_restores_once_and_does_not_crash(doomed_redis):
    with Connection(doomed_redis.url) as producer:
        producer.SimpleQueue("hub-test-q").put({"n": 1})
    conn = Connection(doomed_redis.url)
    tasks = conn.default_channel
    held = []
    Consumer(tasks, [Queue("hub-test-q")], callbacks=[lambda body, message: held.append(message)]).consume()
    remote = conn.channel()
    pidbox = Queue("hub-test.pidbox", Exchange("hub-test.pidbox", "fanout"), auto_delete=True)
    Consumer(remote, [pidbox], callbacks=[lambda body, message: None]).consume()
    deadline = time.monotonic() + 10
    while not held and time.monotonic() < deadline:
        conn.drain_events(timeout=1)
    assert len(held) == 1 and len(tasks.qos._delivered) == 1  # received, never acknowledged
    tasks._brpop_start()  # the next BRPOP in flight, as in the worker's event loop

    os.kill(doomed_redis.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while port_open(doomed_redis.port) and time.monotonic() < deadline:
        time.sleep(0.01)

    try:  # Celery's Consumer.on_connection_error_after_connected, step by step
        conn.collect(socket_timeout=5.0)
    except Exception:  # noqa: BLE001 - Celery ignores whatever collect raises
        pass
    try:
        conn.close()  # Celery: ignore_errors(connection, connection.close), connection errors only
    except conn.connection_errors:
        pass
    assert tasks.closed and tasks.qos._delivered.restored  # the restore was tried (once: it is recorded)
