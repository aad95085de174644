"""pytest fixtures for the Tiiny emulator (register with ``pytest_plugins = ["devices.emulator.fixtures"]``).

- `tiiny_emulator` (session): one emulator process for the whole run, fast clock (speed 3000).
- `tiiny` (function): the same process, reset to a fresh device before each test (unlocked, nothing
  loaded, counters zero, all quirks on, the session's speed).

Set TIINY_EMULATOR_SPEED to run the session at another speed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from devices.emulator.testing import RunningEmulator, run_tensorsharp, run_tiiny

DEFAULT_TEST_SPEED = 3000.0


@pytest.fixture(scope="session")
def tiiny_emulator() -> Iterator[RunningEmulator]:
    speed = float(os.environ.get("TIINY_EMULATOR_SPEED", DEFAULT_TEST_SPEED))
    with run_tiiny(speed=speed, api_key="test-key", quirks="all", discovery=True) as emulator:
        yield emulator


@pytest.fixture
def tiiny(tiiny_emulator: RunningEmulator) -> Iterator[RunningEmulator]:
    tiiny_emulator.reset()
    yield tiiny_emulator
    # Leave nothing running for the next test (a fresh reset happens before it anyway).
    if tiiny_emulator.process.poll() is None:
        tiiny_emulator.reset()


# -- TensorSharp.Server.Host ---------------------------------------------------------------------------------
DEFAULT_TENSORSHARP_SPEED = 600.0


@pytest.fixture(scope="session")
def tensorsharp_emulator() -> Iterator[RunningEmulator]:
    """One TensorSharp emulator (MiniMax-H3) for the whole run; TENSORSHARP_EMULATOR_SPEED overrides speed."""
    speed = float(os.environ.get("TENSORSHARP_EMULATOR_SPEED", DEFAULT_TENSORSHARP_SPEED))
    with run_tensorsharp(speed=speed, model="minimax-h3") as emulator:
        yield emulator


@pytest.fixture
def tensorsharp(tensorsharp_emulator: RunningEmulator) -> Iterator[RunningEmulator]:
    """The session's TensorSharp emulator, reset (no renders, no uploads, counters zero) before each test."""
    tensorsharp_emulator.reset()
    yield tensorsharp_emulator
    if tensorsharp_emulator.process.poll() is None:
        tensorsharp_emulator.reset()  # cancel anything a test left rendering
