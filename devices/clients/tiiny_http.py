"""How the Tiiny speaks HTTP: typed errors for its answers (``tiiny_errors``), JSON calls, downloads.

``TiinyHttp`` is the base of the Tiiny client's layers: ``TiinyRenders`` (``tiiny_renders``) sends renders
through it, ``TiinyClient`` (``tiiny``) manages the device and its models on top.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from devices import errors
from devices.clients import tiiny_errors
from devices.clients.base import HttpDevice, error_text, json_error_text


class TiinyHttp(HttpDevice):
    # -- error mapping (tiiny_errors) ---------------------------------------------------------------------
    def _raise_for(self, resp: httpx.Response, *, what: str, id_call: bool = False) -> None:
        """Map a non-2xx (or a 200 busy envelope) to a typed error."""
        status = resp.status_code
        if 200 <= status < 300:
            if (busy := tiiny_errors.busy_envelope(resp)) is not None:
                raise errors.DeviceBusy(detail=self.scrub(json_error_text(busy)), status=status)
            return
        detail = self.scrub(error_text(resp)) or None
        if status == 502:
            raise self._classify_502(what, detail)
        raise tiiny_errors.error_for(status, detail, id_call=id_call)

    def _classify_502(self, what: str, detail: str | None) -> errors.DeviceError:
        """502 everywhere = locked; 502 from one model while the system answers = early after a load."""
        if what.startswith("sys"):
            return errors.DeviceLocked(detail=detail, status=502)
        try:
            probe = self.request("GET", "/api/v1/sys/status", read=self.timeouts.probe)
        except errors.DeviceError:
            return errors.DeviceLocked(detail=detail, status=502)
        if probe.status_code == 502:
            return errors.DeviceLocked(detail=detail, status=502)
        return errors.Transient(
            "The model answered 502 (it may still be starting).", detail=detail, status=502
        )

    # -- calls -------------------------------------------------------------------------------------------
    def _call(
        self,
        method: str,
        path: str,
        *,
        read: float | None = None,
        what: str = "",
        id_call: bool = False,
        **kw: Any,
    ) -> httpx.Response:
        resp = self.request(method, path, read=read or self.timeouts.manage, **kw)
        self._raise_for(resp, what=what or path, id_call=id_call)
        return resp

    def _get_json(self, path: str, *, read: float | None = None, what: str = "", **kw: Any) -> Any:
        return self.json(self._call("GET", path, read=read, what=what, **kw))

    def _post_json(
        self, path: str, body: Any = None, *, read: float | None = None, what: str = "", **kw: Any
    ) -> Any:
        resp = self._call("POST", path, json=body if body is not None else {}, read=read, what=what, **kw)
        return self.json(resp) if resp.content else {}

    def _fetch_bytes(self, path: str, *, read: float, id_call: bool = False, **kw: Any) -> bytes:
        return self._call("GET", path, read=read, id_call=id_call, **kw).content

    def _download(self, path: str, dest: Path) -> int:
        """A result file, whole (``HttpDevice.fetch_file``: resumed or begun again when it breaks, checked)."""
        return self.fetch_file(path, dest, refuse=lambda resp: self._raise_for(resp, what=path, id_call=True))
