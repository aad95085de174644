from __future__ import annotations

import pytest

from hub.tests.leakguard import register_key
from notify import vapid
from notify.tests.receivers import start_receiver


@pytest.fixture
def receiver():
    made = []

    def start(statuses=None, body=b"ok"):
        r = start_receiver(statuses, body)
        made.append(r)
        return r

    yield start
    for r in made:
        r.server.shutdown()
        r.server.server_close()


@pytest.fixture
def fast_retries(settings):
    settings.NOTIFY_RETRY_DELAYS_S = [0.0, 0.0]
    return settings.NOTIFY_RETRY_DELAYS_S


@pytest.fixture
def allow_loopback(settings):
    """The loopback receivers below are private addresses: a test that sends to one allows it, as an admin
    allows the household's Home Assistant (without it, nothing is sent: notify/tests/test_targets.py)."""
    settings.HUB_NOTIFY_PRIVATE_HOSTS = ["127.0.0.1"]
    return settings.HUB_NOTIFY_PRIVATE_HOSTS


@pytest.fixture
def vapid_key(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    settings.NOTIFY_VAPID_PRIVATE_KEY = ""  # made lazily, as in a test run or before `make up`
    register_key(vapid.private_key(), "the VAPID private key")
    return vapid.private_key()
