"""Typed device errors: the only thing the job engine needs to understand about a failure.

Every failure a device client sees (HTTP status, error envelope, socket error, stream frame) becomes one of
these. Callers decide what to do from the class and ``permanent`` alone and never parse HTTP codes:

* ``permanent=False`` → the same request may succeed later (retry, wait for unlock, load the model, back off).
* ``permanent=True``  → retrying the same request will fail the same way; report ``human`` to the person.

``human`` is safe to show anyone; ``detail`` is the device's own message (also safe: API keys never reach an
error, because the client never puts the key anywhere but the Authorization header).
"""

from __future__ import annotations


class DeviceError(Exception):
    """Base class. ``code`` is a short stable slug (for logs, metrics and tests)."""

    permanent: bool = False
    code: str = "device_error"
    default_human: str = "The device reported an error."

    def __init__(
        self,
        human: str | None = None,
        *,
        detail: str | None = None,
        status: int | None = None,
        permanent: bool | None = None,
    ) -> None:
        self.human = human or self.default_human
        self.detail = detail
        self.status = status
        if permanent is not None:
            self.permanent = permanent
        super().__init__(self.human if not detail else f"{self.human} ({detail})")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, human={self.human!r}, detail={self.detail!r})"


class DeviceLocked(DeviceError):
    """502 on every call after a power cycle, until someone unlocks the device (not permanent)."""

    code = "locked"
    default_human = "The device is locked after a restart."
    #: The reference's advice, shown next to the state.
    fix = "Run `tiiny login` on a computer signed in to TiinyOS, or open the TiinyOS desktop app."


class DeviceUnreachable(DeviceError):
    """Connection refused, DNS failure or timeout (not permanent)."""

    code = "unreachable"
    default_human = "The device cannot be reached."


class DeviceTimeout(DeviceUnreachable):
    """Connected, but no answer within the read timeout (not permanent)."""

    code = "timeout"
    default_human = "The device did not answer in time."


class DeviceSilent(DeviceTimeout):
    """Not asked at all: the device's link went silent and its backoff window runs (``devices.silence``). Raised at
    once, without a request, so a silent device holds no worker slot; the engine treats it as the timeout it is."""


class AuthFailed(DeviceError):
    """401: the API key is wrong or expired (permanent until someone fixes the key)."""

    code = "auth_failed"
    permanent = True
    default_human = "The device rejected the API key."


class ModelNotLoaded(DeviceError):
    """The model (or any model of that kind) is not running; loading it fixes this (not permanent)."""

    code = "model_not_loaded"
    default_human = "The model is not loaded on the device."


class BadRequest(DeviceError):
    """The device rejected the request itself; ``detail`` is the device's own message (permanent)."""

    code = "bad_request"
    permanent = True
    default_human = "The device rejected the request."


class DeviceBusy(DeviceError):
    """The device is busy with something else (code 150004, one-at-a-time); try again later."""

    code = "busy"
    default_human = "The device is busy."


class PoliteRefusal(DeviceBusy):
    """``ensure_loaded(polite=True)`` would have to evict a model the hub did not load.

    ``blocking`` lists those models so the job can tell its owner what it is waiting for.
    """

    code = "polite_refusal"
    default_human = "Another model someone else loaded is in the way."

    def __init__(self, human: str | None = None, *, blocking: list[str] | None = None, **kw) -> None:
        self.blocking = list(blocking or [])
        super().__init__(human, **kw)


class NotFound(DeviceError):
    """A device-side id (video, 3D task, session, upload) no longer exists (permanent for that id)."""

    code = "not_found"
    permanent = True
    default_human = "The device no longer knows this task."


class Transient(DeviceError):
    """5xx, ``xh2a backend fail``, an early 502 right after a load, a 504 gateway cut (not permanent)."""

    code = "transient"
    default_human = "The device had a temporary failure."


class CleanupFailed(Transient):
    """409 ``cleanup_failed`` on launch: the device says to retry the launch."""

    code = "cleanup_failed"
    default_human = "The device could not clean up the previous run; retrying."


class GenerationTimeout(DeviceError):
    """The device cut the render off (GENERATION_TIMEOUT, 1 hour) — permanent for the job.

    The render may keep running on the NPU afterwards; the job engine should stop the model.
    """

    code = "generation_timeout"
    permanent = True
    default_human = "The device stopped the render after its time limit."


class LoadTimeout(Transient):
    """``ensure_loaded`` launched the model but it was not running before the deadline."""

    code = "load_timeout"
    default_human = "The model did not finish loading in time."


__all__ = [
    "AuthFailed",
    "BadRequest",
    "CleanupFailed",
    "DeviceBusy",
    "DeviceError",
    "DeviceLocked",
    "DeviceTimeout",
    "DeviceUnreachable",
    "GenerationTimeout",
    "LoadTimeout",
    "ModelNotLoaded",
    "NotFound",
    "PoliteRefusal",
    "Transient",
]
