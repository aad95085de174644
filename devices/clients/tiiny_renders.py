"""The renders a Tiiny makes: video and 3D (submit, then poll), images, speech and music (one blocking call).

``TiinyRenders`` sits on ``TiinyHttp`` (the device's HTTP conventions); ``TiinyClient`` adds managing the
device and loading models. Which model runs a render is the caller's business (``TiinyClient.ensure_loaded``).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from devices import errors
from devices.clients import tiiny_errors
from devices.clients.base import json_error_text
from devices.clients.tiiny_http import TiinyHttp


class TiinyRenders(TiinyHttp):
    # -- video (poll style) ------------------------------------------------------------------------------
    def video_info(self, model_id: str) -> dict:
        return self._get_json("/v1/video/info", params={"model": model_id})

    def video_create(
        self,
        *,
        model: str,
        prompt: str,
        size: str,
        seconds: int | str,
        steps: int | None = None,
        seed: int | None = None,
        image: str | None = None,
    ) -> dict:
        """Submit a render; ``image`` is a start frame as a data URI. Returns ``{"id", "status", ...}``."""
        body: dict[str, Any] = {"model": model, "prompt": prompt, "size": size, "seconds": str(seconds)}
        if steps is not None:
            body["steps"] = steps
        if seed is not None:
            body["seed"] = seed
        if image:
            body["image"] = image
        return self._post_json("/v1/videos", body, read=self.timeouts.create)

    def video_list(self) -> list[dict]:
        """The device's video jobs (the job engine looks here for a render it lost track of in a crash)."""
        raw = self._get_json("/v1/videos")
        return raw.get("data", []) if isinstance(raw, dict) else list(raw or [])

    def video_get(self, video_id: str) -> dict:
        return self._get_json(
            f"/v1/videos/{quote(video_id, safe='')}", read=self.timeouts.status, id_call=True
        )

    def video_delete(self, video_id: str) -> dict:
        """Deletes the job record. On the device this does not stop a running render; stop the model for that."""
        resp = self._call("DELETE", f"/v1/videos/{quote(video_id, safe='')}", id_call=True)
        return self.json(resp) if resp.content else {}

    def video_download(self, video_id: str, dest: Path) -> int:
        return self._download(f"/v1/videos/{quote(video_id, safe='')}/content", dest)

    #: The typed error for a ``failed`` video (``GENERATION_TIMEOUT`` → ``GenerationTimeout``)
    video_failure = staticmethod(tiiny_errors.video_failure)

    # -- 3D (poll style) ---------------------------------------------------------------------------------
    def capabilities_3d(self) -> dict:
        return self._get_json("/v1/3d/capabilities")

    def task3d_create(self, *, stage: str, params: dict, files: dict[str, tuple[str, bytes, str]]) -> dict:
        if stage == "background":
            raise errors.BadRequest("The background stage is broken on the device.", detail=stage)
        data = {"stage": stage, "params": json.dumps(params)}
        resp = self._call("POST", "/v1/3d/tasks", data=data, files=files or None, read=self.timeouts.submit)
        return self.json(resp)

    def task3d_list(self) -> list[dict]:
        """The device's 3D stage tasks (for crash recovery, like ``video_list``)."""
        raw = self._get_json("/v1/3d/tasks")
        return raw.get("tasks", raw.get("data", [])) if isinstance(raw, dict) else list(raw or [])

    def task3d_get(self, task_id: str) -> dict:
        return self._get_json(
            f"/v1/3d/tasks/{quote(task_id, safe='')}", read=self.timeouts.status, id_call=True
        )

    def task3d_cancel(self, task_id: str) -> dict:
        return self._post_json(f"/v1/3d/tasks/{quote(task_id, safe='')}/cancel", id_call=True)

    def task3d_download(self, task_id_or_url: str, dest: Path) -> int:
        """A task's result: an artifact URL/path given by the device, or the task id (``/artifacts``)."""
        if "/" in task_id_or_url:
            return self._download(self.resolve_own(task_id_or_url), dest)
        return self._download(f"/v1/3d/tasks/{quote(task_id_or_url, safe='')}/artifacts", dest)

    # -- blocking ----------------------------------------------------------------------------------------
    def image_generate(
        self,
        *,
        model: str,
        prompt: str,
        size: str,
        seed: int | None = None,
        steps: int | None = None,
        negative_prompt: str | None = None,
        guidance_scale: float | None = None,
        image: str | None = None,
        timeout: float,
    ) -> bytes:
        """One PNG (the device makes one image per request). ``image`` = a data URI for an edit."""
        body: dict[str, Any] = {
            "model": model,
            "prompt": prompt,
            "size": size,
            "n": 1,
            "response_format": "b64_json",
        }
        for k, v in (
            ("seed", seed),
            ("steps", steps),
            ("negative_prompt", negative_prompt),
            ("guidance_scale", guidance_scale),
            ("image", image),
        ):
            if v is not None:
                body[k] = v
        out = self._post_json("/v1/images/generations", body, read=timeout)
        row = (out.get("data") or [{}])[0]
        if row.get("b64_json"):
            return base64.b64decode(row["b64_json"])
        if row.get("url"):
            return self._fetch_bytes(self.resolve_own(row["url"]), read=timeout)
        raise errors.Transient("The device returned no image.", detail=self.scrub(str(out)[:200]))

    def speech(
        self,
        *,
        model: str,
        input: str,
        voice: str | None = None,
        instruct: str | None = None,
        ref_audio: str | None = None,
        ref_text: str | None = None,
        language: str | None = None,
        response_format: str = "wav",
        timeout: float,
    ) -> bytes:
        body: dict[str, Any] = {"model": model, "input": input, "response_format": response_format}
        for k, v in (
            ("voice", voice),
            ("instruct", instruct),
            ("ref_audio", ref_audio),
            ("ref_text", ref_text),
            ("language", language),
        ):
            if v is not None:
                body[k] = v
        resp = self._call("POST", "/v1/audio/speech", json=body, read=timeout)
        return self._audio_bytes(resp)

    def music_wav(
        self,
        *,
        model: str,
        prompt: str,
        seconds: float,
        steps: int,
        cfg_scale: float,
        seed: int | None,
        timeout: float,
    ) -> bytes:
        """Foundation-1 loop: ``/v1/music/generate/wav`` with ``{model, prompt, config}``."""
        config: dict[str, Any] = {"seconds_total": seconds, "steps": steps, "cfg_scale": cfg_scale}
        if seed is not None:
            config["seed"] = seed
        resp = self._call(
            "POST",
            "/v1/music/generate/wav",
            json={"model": model, "prompt": prompt, "config": config},
            read=timeout,
        )
        return self._audio_bytes(resp)

    def song_preview(
        self,
        *,
        model: str,
        caption: str,
        lyrics: str,
        generation_type: str,
        seconds_total: float,
        preview_seconds: float,
        timeout: float,
    ) -> dict:
        """SongGeneration step 1. Everything goes inside ``config`` (top-level extras are refused)."""
        config = {
            "caption": caption,
            "generation_type": generation_type,
            "seconds_total": seconds_total,
            "preview_seconds": preview_seconds,
        }
        if lyrics:
            config["lyrics"] = lyrics
        return self._music_json("/v1/music/generate/preview", {"model": model, "config": config}, timeout)

    def song_resume(self, *, model: str, session_id: str, config: dict, timeout: float) -> dict:
        return self._music_json(
            "/v1/music/generate/resume", {"model": model, "session_id": session_id, "config": config}, timeout
        )

    def song_download(self, session_id: str, fmt: str = "mp3") -> bytes:
        return self._fetch_bytes(
            f"/v1/music/sessions/{quote(session_id, safe='')}/download",
            read=self.timeouts.download,
            params={"format": fmt},
            id_call=True,
        )

    # -- internals ---------------------------------------------------------------------------------------
    def _music_json(self, path: str, body: dict, timeout: float) -> dict:
        out = self._post_json(path, body, read=timeout, id_call=True)
        if isinstance(out, dict) and out.get("success") is False:
            code = str(out.get("error_code") or "")
            cls = errors.NotFound if code == "SESSION_NOT_FOUND" else errors.BadRequest
            raise cls(detail=self.scrub(json_error_text(out)))
        return out

    def _audio_bytes(self, resp: httpx.Response) -> bytes:
        ctype = resp.headers.get("content-type", "")
        if ctype.startswith("application/json"):
            out = self.json(resp)
            if out.get("success") is False:
                raise errors.BadRequest(detail=self.scrub(json_error_text(out)))
            data = out.get("audio_data") or out.get("audio")
            if not data:
                raise errors.Transient("The device returned no audio.", detail=self.scrub(str(out)[:200]))
            return base64.b64decode(data)
        return resp.content
