"""The Tiiny's answers as typed errors (``devices.errors``), from the status and the device's own message.

Pure: ``TiinyHttp._raise_for`` reads the response, scrubs the message and raises what these return. A 502 is
not decided here: whether it means "locked" or "early after a load" takes one more request
(``TiinyHttp._classify_502``).
"""

from __future__ import annotations

from typing import Any

import httpx

from devices import errors

#: The ``code`` of a 200 answer that means "busy" (an envelope, not a status)
BUSY_CODE = 150004

#: Messages that mean the model asked for is not running, whatever the status
_NOT_LOADED = ("no suitable model", "is not loaded", "model_not_found", "not running")
#: A 500 with one of these is the model refusing what was asked (e.g. a voice it doesn't have): no retry helps
_REFUSED = ("unsupported", "invalid_request", "not supported", "upstream tts model failed")
_BAD_REQUEST = (400, 404, 405, 413, 415, 422)


def busy_envelope(resp: httpx.Response) -> dict[str, Any] | None:
    """The body of a 2xx JSON answer that is really the busy envelope (``{"code": BUSY_CODE, ...}``), else None."""
    if not resp.headers.get("content-type", "").startswith("application/json"):
        return None
    body = resp.json() if resp.content else None
    return body if isinstance(body, dict) and body.get("code") == BUSY_CODE else None


def error_for(status: int, detail: str | None, *, id_call: bool = False) -> errors.DeviceError:
    """The typed error for a non-2xx answer other than 502. ``detail``: the device's message (scrubbed);
    ``id_call``: the path names one of our ids (a video, a task, a session), so a 404 means it is gone."""
    low = (detail or "").lower()
    if status in (401, 403):
        return errors.AuthFailed(detail=detail, status=status)
    return _by_message(status, low, detail) or _by_status(status, low, detail, id_call)


def _by_message(status: int, low: str, detail: str | None) -> errors.DeviceError | None:
    """Errors the message decides, whatever the status."""
    if any(s in low for s in _NOT_LOADED):
        return errors.ModelNotLoaded(detail=detail, status=status)
    if "xh2a" in low:
        return errors.Transient("The model's backend was not ready yet.", detail=detail, status=status)
    return None


def _by_status(status: int, low: str, detail: str | None, id_call: bool) -> errors.DeviceError:
    if status == 409 and ("cleanup" in low or "physical_stop" in low):
        return errors.CleanupFailed(detail=detail, status=status)
    if status in (409, 429):
        return errors.DeviceBusy(detail=detail, status=status)
    if status == 404 and (id_call or "not_found" in low or "session not found" in low):
        return errors.NotFound(detail=detail, status=status)
    if status in _BAD_REQUEST or (status == 500 and any(s in low for s in _REFUSED)):
        return errors.BadRequest(detail=detail, status=status)
    return errors.Transient(detail=detail, status=status)


def video_failure(video: dict) -> errors.DeviceError:
    """The typed error for a ``failed`` video (``GENERATION_TIMEOUT`` → ``GenerationTimeout``)."""
    err = video.get("error") or {}
    code = str(err.get("code") or "") if isinstance(err, dict) else ""
    msg = (err.get("message") if isinstance(err, dict) else str(err)) or "The render failed."
    if code.upper() == "GENERATION_TIMEOUT":
        return errors.GenerationTimeout(detail=msg)
    if "bucket" in msg.lower() or "canvas" in msg.lower():
        return errors.BadRequest(detail=msg)
    return errors.BadRequest("The device reported the render as failed.", detail=msg)
