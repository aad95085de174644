from __future__ import annotations

import pytest

from devices.services import device_register


@pytest.fixture
def pocket(db, tiiny):
    """A registered device pointing at the (reset) Tiiny emulator."""
    return device_register(name="Pocket", kind="tiiny", base_url=tiiny.base_url, api_key=tiiny.api_key)
