"""``hub.testing.run_async`` gives a test's thread back when its wait is interrupted (a test's timeout), even while
the loop's cleanup never ends: a thread pool's ``with`` joined such a loop again and hung CI's PostgreSQL pass."""

from __future__ import annotations

import asyncio
import signal

import pytest

from hub.testing import run_async


class Alarm(Exception):
    """What pytest-timeout's alarm raises, in small."""


def test_an_interrupted_wait_leaves_a_loop_whose_cleanup_never_ends_behind():
    async def stubborn() -> None:
        async def never_cancelled() -> None:
            while True:
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    continue  # swallows every cancellation: asyncio.run's cleanup waits for it for ever

        asyncio.get_running_loop().create_task(never_cancelled())
        raise RuntimeError("the scenario failed")  # asyncio.run now cancels the task above, in vain

    def ring(*_args) -> None:
        raise Alarm

    before = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(Alarm):
            run_async(stubborn)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def test_a_value_and_an_error_come_back_to_the_test():
    async def answer(n: int) -> int:
        await asyncio.sleep(0)
        return n * 2

    async def fails() -> None:
        raise ValueError("no")

    assert run_async(answer, 21) == 42
    with pytest.raises(ValueError, match="no"):
        run_async(fails)
