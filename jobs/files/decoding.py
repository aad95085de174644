"""Decoding pictures within a budget: how many pixels one may have, and how many are decoded at once in a process.

A picture's cost is its pixels, not its bytes: a 154 KB PNG of 6300×6300 decodes to ~120 MB (RGB) and took ~150 MB
at its peak, and six at once took a web worker from 155 to 704 MB. So the size is read from the header before any
pixel is decoded (Pillow's ``Image.open`` reads only the header; nothing may call ``load()`` before
:func:`check_pixels`), the pixel budget (``HUB_IMAGE_MAX_MP``) follows the profile (hub.profile: 16 MP on the small
one, 40 on the standard one), and the decodes a process runs at once are bounded (``HUB_IMAGE_DECODES``): what
one process may spend on pictures is about budget × 4 bytes × decodes.

The bound is per process, which is what each process's memory needs; a threading semaphore, since a web process
serves its requests in threads (hub.handlers) and a Celery worker's prefork child runs one task at a time.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator

from django.conf import settings

#: How long a request waits for another's decode to end before it is told to try again.
DECODE_WAIT_S = 20.0


class TooManyPixels(Exception):
    """The picture's header declares more pixels than this hub decodes."""

    def __init__(self, size: tuple[int, int], budget: int) -> None:
        super().__init__(f"{size[0]}×{size[1]} is over {budget} pixels")
        self.size, self.budget = size, budget

    @property
    def text(self) -> str:
        """``6300×6300 pixels (40 MP); the limit is 16 MP``: for a sentence that names the picture."""
        w, h = self.size
        return f"{w}×{h} pixels ({w * h / 1e6:.0f} MP); the limit is {self.budget // 10**6} MP"


class DecodersBusy(Exception):
    """Every decode slot of this process stayed taken for :data:`DECODE_WAIT_S`."""


def pixel_budget() -> int:
    """The most pixels a picture may have here (``HUB_IMAGE_MAX_MP``, by default the profile's)."""
    return settings.HUB_IMAGE_MAX_MP * 1_000_000


def check_pixels(size: tuple[int, int]) -> None:
    """Raise :class:`TooManyPixels` for a size (read from a header) over the budget."""
    budget = pixel_budget()
    if size[0] * size[1] > budget:
        raise TooManyPixels(size, budget)


@functools.cache
def _slots(count: int) -> threading.BoundedSemaphore:
    # One per count: a test (or settings reloaded) that changes HUB_IMAGE_DECODES gets a semaphore of its own.
    return threading.BoundedSemaphore(count)


@contextlib.contextmanager
def decode_slot(*, wait_s: float | None = None) -> Iterator[None]:
    """Hold one of this process's ``HUB_IMAGE_DECODES`` decode slots while decoding; :class:`DecodersBusy` when
    none frees within ``wait_s`` (:data:`DECODE_WAIT_S`)."""
    slots = _slots(settings.HUB_IMAGE_DECODES)
    if not slots.acquire(timeout=DECODE_WAIT_S if wait_s is None else wait_s):
        raise DecodersBusy
    try:
        yield
    finally:
        slots.release()
