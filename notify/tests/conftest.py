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
