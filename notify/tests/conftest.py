from __future__ import annotations

import pytest

from notify.tests.receivers import start_receiver


@pytest.fixture
def receiver():
    made = []

    def start(statuses=None):
        r = start_receiver(statuses)
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
