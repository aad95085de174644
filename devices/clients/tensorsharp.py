"""TensorSharp.Server.Host client (reference: tensorsharp-server-api.md, field notes §11).

No auth and one hosted model. Long runs are held by the caller: the SSE streams carry progress and the render
dies with the connection, so ``video_stream``/``image_edit_stream`` are generators the job runner drives.
Refusals inside a stream are frames (``{"done": true, "error": ...}``), not HTTP statuses.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from devices import errors
from devices.capabilities import Capabilities, ModelCap, TensorSharpCap, VideoCap, tensorsharp_cap
from devices.clients.base import DEFAULT_TIMEOUTS, HttpDevice, Timeouts, error_text

logger = logging.getLogger("devices.clients.tensorsharp")


class TensorSharpClient(HttpDevice):
    def __init__(
        self,
        base_url: str,
        *,
        transport: httpx.BaseTransport | None = None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
    ) -> None:
        super().__init__(base_url, transport=transport, timeouts=timeouts)

    @classmethod
    def for_device(cls, device: Any, **kw: Any) -> TensorSharpClient:
        return cls(device.base_url, **kw)

    def _raise_for(self, resp: httpx.Response, *, id_call: bool = False) -> None:
        status = resp.status_code
        if status < 300:
            return
        detail = error_text(resp) or None
        low = (detail or "").lower()
        if status in (401, 403):
            # TensorSharp has no auth; a 401 comes from a reverse proxy in front of it.
            raise errors.AuthFailed(
                "A proxy in front of the server refused the request.", detail=detail, status=status
            )
        if "not a video-generation model" in low or "not a qwen-image-edit model" in low:
            raise errors.ModelNotLoaded(detail=detail, status=status)
        if status == 404:
            raise (errors.NotFound if id_call else errors.BadRequest)(detail=detail, status=status)
        if status in (400, 405, 413, 415, 422):
            raise errors.BadRequest(detail=detail, status=status)
        if status == 507:
            raise errors.DeviceBusy("The server's upload quota is full.", detail=detail, status=status)
        if status == 502:
            raise errors.DeviceUnreachable(
                "A proxy could not reach the server.", detail=detail, status=status
            )
        raise errors.Transient(detail=detail, status=status)

    def _get(self, path: str, *, read: float | None = None) -> httpx.Response:
        resp = self.request("GET", path, read=read or self.timeouts.probe)
        self._raise_for(resp)
        return resp

    # -- basics ------------------------------------------------------------------------------------------
    def health(self) -> str:
        return self._get("/health").text.strip().strip('"')

    def models(self) -> dict:
        return self.json(self._get("/api/models"))

    def capabilities(self, previous: Capabilities | None = None) -> Capabilities:
        """The hosted model (the one loaded) and the others it could host; video options for a video model."""
        raw = self.models()
        ts = tensorsharp_cap(raw)
        caps = Capabilities(kind="tensorsharp", tensorsharp=ts)
        loaded, kind = ts.loaded, _loaded_kind(ts)
        for name in raw.get("models") or ([loaded] if loaded else []):
            caps.models.append(
                ModelCap(
                    id=name,
                    name=name,
                    kind=kind if name == loaded else "other",
                    type=ts.architecture,
                    loaded=name == loaded,
                    status="running" if name == loaded else "",
                )
            )
        if ts.video is not None and loaded:
            caps.video[loaded] = _video_cap(ts, ts.video)
        return caps

    # -- uploads and results -----------------------------------------------------------------------------
    def upload(self, name: str, data: bytes, mime: str) -> dict:
        """``{"ok", "file", "url", ...}``; pass ``file`` as ``imagePath``/``endImage`` in later requests."""
        resp = self.request(
            "POST", "/api/upload", read=self.timeouts.submit, files={"file": (name, data, mime)}
        )
        self._raise_for(resp)
        out = self.json(resp)
        if isinstance(out, dict) and out.get("ok") is False:
            raise errors.BadRequest(detail=str(out.get("error") or out))
        return out

    def download(self, url_or_path: str, dest: Path) -> int:
        """Fetch a ``/uploads/...`` result; relative paths resolve against our base URL only."""
        return self.fetch_file(
            self.resolve_own(url_or_path), dest, refuse=lambda resp: self._raise_for(resp, id_call=True)
        )

    # -- streams -----------------------------------------------------------------------------------------
    def video_stream(self, params: dict, *, read_timeout: float) -> Iterator[dict]:
        """Yield every SSE frame of ``/api/video-generate/stream``; the last one has ``done: true``.

        Raises ``BadRequest`` on ``{"done": true, "error": ...}`` and ``Transient`` if the stream ends
        without a final frame (the render is lost with the connection).
        """
        yield from self._sse("/api/video-generate/stream", params, read_timeout)

    def image_edit_stream(self, params: dict, *, read_timeout: float) -> Iterator[dict]:
        yield from self._sse("/api/image-edit/stream", params, read_timeout)

    def _sse(self, path: str, params: dict, read_timeout: float) -> Iterator[dict]:
        with self.stream(
            "POST", path, read=read_timeout, json=params, headers={"Accept": "text/event-stream"}
        ) as resp:
            if resp.status_code >= 300:
                resp.read()
                self._raise_for(resp)
            try:
                for frame in _sse_frames(resp.iter_lines()):
                    if frame.get("done") and frame.get("error"):
                        err = str(frame["error"])
                        cls = (
                            errors.ModelNotLoaded
                            if "not a video-generation model" in err.lower()
                            else errors.BadRequest
                        )
                        raise cls(detail=err)
                    yield frame
                    if frame.get("done"):
                        return
            except httpx.HTTPError as exc:
                raise self._transport_error(exc, "POST", path) from None
        raise errors.Transient("The server closed the stream before the render finished.", detail=path)


def _sse_frames(lines: Iterator[str]) -> Iterator[dict]:
    """``data: <json>`` frames separated by blank lines (multi-line data joined); no ``[DONE]`` sentinel."""
    buf: list[str] = []
    for line in lines:
        if line.startswith("data:"):
            buf.append(line[5:].lstrip())
        elif line == "" and buf:
            data = "\n".join(buf)
            buf = []
            if data.strip() == "[DONE]":
                return
            try:
                frame = json.loads(data)
            except ValueError:
                logger.warning("unreadable SSE frame from device: %.100s", data)
                continue
            if isinstance(frame, dict):
                yield frame
    if buf:
        try:
            frame = json.loads("\n".join(buf))
            if isinstance(frame, dict):
                yield frame
        except ValueError:
            pass


def _loaded_kind(ts: TensorSharpCap) -> str:
    """What the loaded model does: video, image edits, or (anything else) chat."""
    arch = ts.architecture.lower()
    if ts.video is not None:
        return "video"
    if "qwen_image" in arch or "image-edit" in ts.loaded.lower() or "image_edit" in arch:
        return "image_edit"
    return "chat"


def _video_cap(ts: TensorSharpCap, video: dict[str, Any]) -> VideoCap:
    """The loaded video model's options. Sizes are free (multiples of 32); steps are the quality lever (4-8 fast,
    20 default on H3)."""
    return VideoCap(
        model_id=ts.loaded,
        canvases=[],
        step_options=list(range(4, 21)),
        default_steps=20 if ts.fps == 24 else 30,
        fps=ts.fps or 24,
        max_seconds=7,
        max_keyframes=_max_keyframes(video),
        audio={"sample_rate": 32000, "channels": 2, "sidecar": True} if video.get("supportsAudio") else None,
    )


def _max_keyframes(video: dict[str, Any]) -> int:
    """Start and end frames (2), a start frame only (1), or none."""
    if video.get("supportsEndImageConditioning"):
        return 2
    return 1 if video.get("supportsImageConditioning") else 0
