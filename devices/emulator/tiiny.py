"""Tiiny Pocket emulator: a time-scaled Starlette app that answers like TiinyOS 0.1.38.

`create_app(Options(...))` builds it. Shapes, status codes and quirks follow
shared/reference/tiiny-device-api.md (the authority) and tiiny-field-notes.md (real response shapes).
Routes are registered with their documented template (e.g. ``GET /v1/videos/{id}``), which is also the key
under which /__emulator__/counters counts them.
"""

from __future__ import annotations

import base64
import contextlib
import json
import random
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from devices.emulator import catalog, tiiny_chat
from devices.emulator.catalog import MODELS, ModelSpec
from devices.emulator.discovery import Discovery
from devices.emulator.quirks import ALL_QUIRKS, UnknownQuirk, check_names, parse_quirks
from devices.emulator.tiiny_replies import Reply, mgmt_error, oai_error
from devices.emulator.tiiny_state import DeviceState, Instance, MusicSession, Options, Task3D, VideoJob

Handler = Callable[[Request], Awaitable[Response]]

TIINY_OS = "0.1.38"
SERVICE_VERSION = "0.1.30"
MODELS_REDIRECT_URL = "http://p8800.api.tiiny/api/v1/models/"

NGINX_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
    "</center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)


def _media() -> Any:
    # Imported lazily: media pulls in Pillow and imageio-ffmpeg, which the control plane does not need.
    from devices.emulator import media

    return media


def _now() -> int:
    return int(time.time())


# ==========================================================================================================
# The app
# ==========================================================================================================


class TiinyApp:
    def __init__(self, options: Options) -> None:
        self.state = DeviceState(options)
        self.discovery = Discovery(self.state)
        self.routes: list[Route] = []
        self.link_cuts: list = [
            0,
            0.0,
        ]  # result downloads the link still drops part-way, and where (``ctl_cut_downloads``)
        self._register()

    # ----- registration -----------------------------------------------------------------------------------
    def add(
        self,
        method: str,
        template: str,
        handler: Handler,
        *,
        path: str | None = None,
        auth: bool = True,
        control: bool = False,
    ) -> None:
        key = f"{method} {template}"
        state = self.state

        async def endpoint(request: Request) -> Response:
            if not control:
                state.counters.requests[key] += 1
                if state.is_locked():
                    # The gateway cannot reach the locked /data services: nginx's own 502 page.
                    return Response(NGINX_502, status_code=502, media_type="text/html")
                if auth and not self._authorized(request):
                    return JSONResponse({"code": 401, "msg": "Not authenticated"}, status_code=401)
            try:
                return await handler(request)
            except Reply as reply:
                return JSONResponse(reply.body, status_code=reply.status)

        self.routes.append(Route(path or template, endpoint, methods=[method]))

    def _authorized(self, request: Request) -> bool:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and token.strip() in self.state.options.api_keys

    def build(self) -> Starlette:
        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            await self.discovery.start()
            try:
                yield
            finally:
                self.state._cancel_all()
                await self.discovery.stop()

        async def not_found(request: Request, exc: Exception) -> Response:
            if self.state.is_locked() and not request.url.path.startswith("/__emulator__"):
                return Response(NGINX_502, status_code=502, media_type="text/html")
            return JSONResponse({"detail": "Not Found"}, status_code=404)

        async def method_not_allowed(request: Request, exc: Exception) -> Response:
            return JSONResponse({"detail": "Method Not Allowed"}, status_code=405)

        app = Starlette(
            routes=self.routes,
            lifespan=lifespan,
            exception_handlers={404: not_found, 405: method_not_allowed},
        )
        app.router.redirect_slashes = False  # the device redirects one path only, to another host
        app.state.tiiny = self
        return app

    def _register(self) -> None:
        a = self.add
        # Control plane (not part of the device).
        for name in (
            "power_cycle",
            "unlock",
            "lock",
            "speed",
            "load",
            "reset",
            "reset_counters",
            "cut_downloads",
        ):
            a("POST", f"/__emulator__/{name}", getattr(self, f"ctl_{name}"), auth=False, control=True)
        a("GET", "/__emulator__/quirks", self.ctl_quirks, auth=False, control=True)
        a("POST", "/__emulator__/quirks", self.ctl_quirks, auth=False, control=True)
        a("GET", "/__emulator__/counters", self.ctl_counters, auth=False, control=True)
        a("GET", "/__emulator__/info", self.ctl_info, auth=False, control=True)
        # System.
        a("GET", "/api/v1/sys/status", self.sys_status)
        a("GET", "/api/v1/sys/device_info", self.sys_device_info)
        a("GET", "/api/v1/sys/ac_power/", self.sys_ac_power)
        a("GET", "/api/v1/npu/status", self.npu_hardware)
        a("GET", "/api/v1/models/npu/status", self.npu_units)
        # Knowledge base / vault: only the nightly memory summaries' settings.
        a("GET", "/kb/memory/schedule", self.kb_schedule)
        a("PUT", "/kb/memory/schedule", self.kb_schedule_put)
        a("GET", "/kb/memory/model", self.kb_model)
        a("PUT", "/kb/memory/model", self.kb_model_put)
        # Models (fixed paths before the {id:path} ones).
        a("GET", "/api/v1/models", self.models_no_slash, auth=False)
        a("GET", "/api/v1/models/", self.models_list)
        a("GET", "/api/v1/models/running", self.models_running)
        a("POST", "/api/v1/models/unload_all", self.models_unload_all)
        a(
            "GET",
            "/api/v1/models/{id}/unload_candidate",
            self.models_unload_candidate,
            path="/api/v1/models/{id:path}/unload_candidate",
        )
        a("POST", "/api/v1/models/{id}/launch", self.models_launch, path="/api/v1/models/{id:path}/launch")
        a("POST", "/api/v1/models/{id}/start", self.models_launch, path="/api/v1/models/{id:path}/start")
        a("POST", "/api/v1/models/{id}/stop", self.models_stop, path="/api/v1/models/{id:path}/stop")
        a("GET", "/v1/models", self.v1_models)
        # Video.
        a("GET", "/v1/video/info", self.video_info)
        a("POST", "/v1/videos", self.video_create)
        a("GET", "/v1/videos", self.video_list)
        a("GET", "/v1/videos/{id}", self.video_get)
        a("DELETE", "/v1/videos/{id}", self.video_delete)
        a("GET", "/v1/videos/{id}/content", self.video_content)
        # 3D.
        a("GET", "/v1/3d/capabilities", self.td_capabilities)
        a("POST", "/v1/3d/tasks", self.td_create)
        a("GET", "/v1/3d/tasks", self.td_list)
        a("GET", "/v1/3d/tasks/{id}", self.td_get)
        a("POST", "/v1/3d/tasks/{id}/cancel", self.td_cancel)
        a("GET", "/v1/3d/tasks/{id}/artifacts", self.td_artifacts)
        a("GET", "/v1/3d/tasks/{id}/artifacts/{name}", self.td_artifact)
        # Music.
        a("GET", "/v1/music/info", self.music_info)
        a("GET", "/v1/music/sessions", self.music_sessions)
        a("GET", "/v1/music/sessions/{id}/download", self.music_download)
        a("POST", "/v1/music/generate", self.music_generate)
        a("POST", "/v1/music/generate/wav", self.music_generate_wav)
        a("POST", "/v1/music/generate/preview", self.music_preview)
        a("POST", "/v1/music/generate/resume", self.music_resume)
        # Images, speech, chat.
        a("POST", "/v1/images/generations", self.images_generate)
        a("GET", "/v1/images/files/{name}", self.images_file)
        a("POST", "/v1/audio/speech", self.speech)
        a("POST", "/v1/chat/completions", self.chat)

    # ======================================================================================================
    # helpers
    # ======================================================================================================
    @staticmethod
    async def _json(request: Request) -> dict[str, Any]:
        raw = await request.body()
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise Reply(
                422,
                {
                    "detail": [
                        {"type": "json_invalid", "loc": ["body", 0], "msg": f"JSON decode error: {exc}"}
                    ]
                },
            ) from exc
        if not isinstance(body, dict):
            raise Reply(
                422, {"detail": [{"type": "dict_type", "loc": ["body"], "msg": "Input should be an object"}]}
            )
        return body

    @staticmethod
    def _spec(model_id: str) -> ModelSpec:
        spec = MODELS.get(model_id)
        if spec is None:
            raise mgmt_error(404, "Model not found.", f"{model_id} is not installed")
        return spec

    def _model(self, kinds: tuple[str, ...], requested: str | None, what: str) -> Instance:
        """Resolve the loaded model a /v1 route talks to, with the §6 envelopes and the after-load 502."""
        st = self.state
        if requested:
            inst = st.running(requested)
            if inst is None:
                raise Reply(
                    404,
                    {
                        "error": {
                            "code": 404,
                            "message": f'"{requested}" is not loaded.',
                            "type": "model_not_found",
                        }
                    },
                )
            if inst.spec.kind not in kinds:
                raise oai_error(400, f"Model '{requested}' does not support {what}.", param="model", code=400)
        else:
            inst = next(
                (i for i in st.instances.values() if i.status == "running" and i.spec.kind in kinds), None
            )
            if inst is None:
                raise oai_error(503, "No suitable model is currently running.", "service_unavailable")
        if st.q("bad_gateway_after_load") and st.clock.now() < inst.bad_gateway_until:
            raise Reply(502, {"error": {"message": "Bad Gateway", "type": "upstream_error"}})
        return inst

    def _first_inference(self, inst: Instance) -> None:
        """xh2a_after_load: a model that just came up fails its first inference; a retry works."""
        fresh, inst.fresh = inst.fresh, False
        if fresh and self.state.q("xh2a_after_load"):
            raise oai_error(500, "xh2a backend fail", "server_error")

    async def _infer(self, inst: Instance, device_seconds: float) -> None:
        if not await self.state.run_blocking(inst, device_seconds):
            # A power cycle mid-request: the gateway loses its upstream.
            raise Reply(502, {"error": {"message": "Bad Gateway", "type": "upstream_error"}})

    async def _infer_making(
        self, inst: Instance, device_seconds: float, make: Callable[[], Awaitable[bytes]]
    ) -> bytes:
        """An inference that answers with media: the media (Pillow, a synthesised WAV: real CPU time here) is
        made while the inference runs, so the answer is ready when the device's work ends, as on the device
        (renders and 3D stages make theirs the same way). Made after it, a 10 s loop's WAV took 150-500 ms
        past the end of the device's work, and a client would have waited for the emulator's own CPU."""
        media = self.state.spawn(make())
        try:
            await self._infer(inst, device_seconds)
        except BaseException:
            media.cancel()
            raise
        return await media

    # ======================================================================================================
    # control plane
    # ======================================================================================================
    async def ctl_power_cycle(self, request: Request) -> Response:
        self.state.power_cycle()
        return JSONResponse({"ok": True, "locked": self.state.locked})

    async def ctl_unlock(self, request: Request) -> Response:
        self.state.locked = False
        return JSONResponse({"ok": True, "locked": False})

    async def ctl_lock(self, request: Request) -> Response:
        self.state.locked = True
        return JSONResponse({"ok": True, "locked": True})

    async def ctl_quirks(self, request: Request) -> Response:
        st = self.state
        if request.method == "POST":
            body = await self._json(request)
            try:
                if "enabled" in body:
                    st.quirks = parse_quirks(body["enabled"])
                st.quirks |= set(check_names(body.get("enable", [])))
                st.quirks -= set(check_names(body.get("disable", [])))
            except UnknownQuirk as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse({"enabled": sorted(st.quirks), "all": list(ALL_QUIRKS)})

    async def ctl_speed(self, request: Request) -> Response:
        body = await self._json(request)
        try:
            self.state.clock.set_speed(float(body["speed"]))
        except (KeyError, TypeError, ValueError) as exc:
            return JSONResponse({"error": f'body must be {{"speed": > 0}}: {exc}'}, status_code=400)
        return JSONResponse({"speed": self.state.clock.speed})

    async def ctl_load(self, request: Request) -> Response:
        body = await self._json(request)
        spec = MODELS.get(str(body.get("model_id", "")))
        if spec is None:
            return JSONResponse({"error": f"unknown model_id {body.get('model_id')!r}"}, status_code=400)
        inst = self.state.load_now(spec, arm_quirks=bool(body.get("arm_quirks", False)))
        return JSONResponse({"model_id": spec.model_id, "status": inst.status})

    async def ctl_reset(self, request: Request) -> Response:
        body = await self._json(request)
        try:
            quirks = parse_quirks(body["quirks"]) if "quirks" in body else None
        except UnknownQuirk as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        speed = float(body["speed"]) if body.get("speed") else None
        self.state.reset(quirks=quirks, speed=speed, locked=bool(body.get("locked", False)))
        return JSONResponse(
            {"ok": True, "speed": self.state.clock.speed, "quirks": sorted(self.state.quirks)}
        )

    async def ctl_cut_downloads(self, request: Request) -> Response:
        """A link fault, not a device quirk: the next ``count`` result downloads stop after ``fraction`` of their
        bytes and the connection drops, as a Wi-Fi link that goes away mid-body does (the device itself never
        answers ``Range``: the reference names no such support, so a download that broke is asked again whole)."""
        body = await self._json(request)
        try:
            self.link_cuts = [int(body.get("count", 1)), float(body.get("fraction", 0.6))]
        except (TypeError, ValueError) as exc:
            return JSONResponse(
                {"error": f'body must be {{"count": n, "fraction": 0-1}}: {exc}'}, status_code=400
            )
        return JSONResponse({"count": self.link_cuts[0], "fraction": self.link_cuts[1]})

    def _maybe_cut(self, path: Any, media_type: str) -> Response | None:
        """The next cut download (``ctl_cut_downloads``): a body that stops part-way, its full length declared."""
        count, fraction = self.link_cuts
        if count <= 0:
            return None
        self.link_cuts = [count - 1, fraction]
        with open(path, "rb") as fh:  # a small test video, read once
            data = fh.read()

        async def body() -> AsyncIterator[bytes]:
            yield data[: int(len(data) * fraction)]
            raise ConnectionResetError("the emulated link dropped mid-body")

        return StreamingResponse(body(), media_type=media_type, headers={"Content-Length": str(len(data))})

    async def ctl_counters(self, request: Request) -> Response:
        return JSONResponse(self.state.counters.as_dict())

    async def ctl_reset_counters(self, request: Request) -> Response:
        st = self.state
        current = st.counters.current_work
        st.counters = type(st.counters)(current_work=current, peak_concurrent_work=current)
        return JSONResponse(st.counters.as_dict())

    async def ctl_info(self, request: Request) -> Response:
        st = self.state
        return JSONResponse(
            {
                "emulator": "tiiny",
                "tiiny_os": TIINY_OS,
                "speed": st.clock.speed,
                "device_time": round(st.clock.now(), 3),
                "locked": st.locked,
                "quirks": sorted(st.quirks),
                "discovery_port": st.discovery_port,
                "udp_port": st.udp_port,
                "models": sorted(st.instances),
            }
        )

    # ======================================================================================================
    # system
    # ======================================================================================================
    async def sys_status(self, request: Request) -> Response:
        st = self.state
        busy = st.npu_busy()
        cores = [round(random.uniform(8, 40) if busy else random.uniform(0, 9), 1) for _ in range(12)]
        mem_total = 33_390_000_000
        mem_used = int(7_000_000_000 + 120_000_000 * len(st.instances) + random.uniform(0, 3e8))
        body = {
            "cpu": {"total_percent": round(sum(cores) / len(cores), 1), "per_core_percent": cores},
            "memory": {
                "usage_percent": round(mem_used / mem_total * 100, 1),
                "used_bytes": mem_used,
                "total_bytes": mem_total,
            },
            "disk": {"used_bytes": 165_000_000_000, "total_bytes": 934_000_000_000},
            "gpu": {"name": "GPU-0", "memory_total_mb": 0},
            "npus": [
                {
                    "utilization_percent": st.npu_util(),
                    "memory_used_mb": st.npu_mem_used_mb(),
                    "memory_total_mb": float(49024),
                    "name": "Houmo dNPU",
                }
            ],
        }
        return JSONResponse(body)

    async def sys_device_info(self, request: Request) -> Response:
        return JSONResponse(
            {
                "device_name": self.state.options.device_name,
                "device_model_name": "Tiiny z01",
                "device_model_version": "z01",
                "tiiny_os": TIINY_OS,
                "version": SERVICE_VERSION,
                "cpu": "ARMv9.2",
                "gpu": "G720",
                "dnpu": "160 BF16 TOPs",
                "peak_int8": "190 TOPS (30 TOPS on SoC, 160 TOPS on dNPU)",
                "ram": "80 GB (32 GB on SoC, 48 GB on dNPU)",
                "storage": "1 TB",
                "network": "wifi",
                "settings": {"auto_start": False, "ac_power": False},
            }
        )

    async def sys_ac_power(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "ac_power": False})

    async def npu_hardware(self, request: Request) -> Response:
        st = self.state
        running = [mid for mid, i in st.instances.items() if i.status == "running"]
        if st.npu_blackout():
            devices, npu = [], {"status": "unavailable", "status_message": "hm-smi returned no devices"}
        else:
            devices = [
                {
                    "device_id": 0,
                    "util_percent": st.npu_util()
                    if st.instances
                    else None,  # util only while a model is loaded
                    "mem_used_mb": st.npu_mem_used_mb(),
                    "mem_total_mb": 49024,
                    "temp_c": None,
                    "power_w": None,
                    "model": "LQ50-48GB",
                    "sn": st.options.serial_number,
                    "bdf": None,
                }
            ]
            npu = {"status": "ready", "status_message": "ok"}
        return JSONResponse(
            {
                "hm_smi_available": bool(devices),
                "devices": devices,
                "cpu": {
                    "total_percent": round(
                        random.uniform(10, 30) if st.npu_busy() else random.uniform(1, 8), 1
                    )
                },
                "memory": {"usage_percent": round(random.uniform(21, 24), 1)},
                "occupants": [{"app_id": "tiinyos", "activate_model": running}] if running else [],
                "npu": npu,
            }
        )

    async def npu_units(self, request: Request) -> Response:
        st = self.state
        used = st.used_units()
        return JSONResponse(
            {
                "npu_total": 100,
                "npu_used": used,
                "npu_available": max(0, 100 - used),
                "models": [
                    {
                        "model_id": mid,
                        "npu_usage": i.spec.npu_usage,
                        "status": "running" if i.status == "running" else "loading",
                    }
                    for mid, i in st.instances.items()
                ],
            }
        )

    # ======================================================================================================
    # knowledge base / vault
    # ======================================================================================================
    async def kb_schedule(self, request: Request) -> Response:
        return JSONResponse({**self.state.memory_schedule, "worker": {"state": "idle"}})

    async def kb_schedule_put(self, request: Request) -> Response:
        body = await self._json(request)
        for key in ("nightly_start_hour", "nightly_end_hour"):
            if key in body and (type(body[key]) is not int or not 0 <= body[key] <= 23):
                raise Reply(422, {"detail": [{"type": "int_range", "loc": ["body", key], "msg": "0 to 23"}]})
        if "enabled" in body and not isinstance(body["enabled"], bool):
            raise Reply(422, {"detail": [{"type": "bool_type", "loc": ["body", "enabled"], "msg": "a bool"}]})
        keys = ("nightly_start_hour", "nightly_end_hour", "enabled")
        self.state.memory_schedule.update({k: body[k] for k in keys if k in body})
        return await self.kb_schedule(request)

    async def kb_model(self, request: Request) -> Response:
        st = self.state
        chats = [mid for mid, i in st.instances.items() if i.status == "running" and i.spec.kind == "chat"]
        return JSONResponse({**st.memory_model, "running_models": chats})

    async def kb_model_put(self, request: Request) -> Response:
        body = await self._json(request)
        model_id = body.get("model_id", self.state.memory_model["model_id"])
        spec = MODELS.get(model_id) if model_id else None
        if model_id and (spec is None or spec.kind != "chat"):
            raise Reply(400, {"detail": f"{model_id} is not an installed chat model"})
        enabled = body.get("automatic_summary_enabled", self.state.memory_model["automatic_summary_enabled"])
        self.state.memory_model.update(model_id=model_id, automatic_summary_enabled=bool(enabled))
        return await self.kb_model(request)

    # ======================================================================================================
    # models
    # ======================================================================================================
    def _model_row(self, spec: ModelSpec) -> dict[str, Any]:
        inst = self.state.instances.get(spec.model_id)
        status = "stopped" if inst is None else ("running" if inst.status == "running" else "loading")
        row: dict[str, Any] = {
            "name": spec.name,
            "fullname": spec.model_id,
            "size": spec.total_size,
            "toolkit_size": 0,
            "runtime_size": 0,
            "total_size": spec.total_size,
            "params": spec.params,
            "type": spec.type,
            "id": spec.model_id,
            "model_id": spec.model_id,
            "display_name": spec.name,
            "hf_repo_id": spec.model_id,
            "object": "model",
            "created": 0,
            "owned_by": "Model store",
            "status": status,
            "download_status": "downloaded",
            "progress": 100.0,
            "capabilities": [spec.capability],
            "input": spec.input,
            "output": spec.output,
            "supported": list(spec.supported),
            "npu_usage": spec.npu_usage,
            "load_time": spec.load_time,
            "desc": spec.desc,
            "version": "1.0.0",
        }
        if spec.thinking is not None:
            row["thinking"] = spec.thinking
        return row

    async def models_no_slash(self, request: Request) -> Response:
        if self.state.q("models_redirect"):
            # The gateway answers with an absolute URL on the model-service vhost (field notes §1.2).
            query = f"?{request.url.query}" if request.url.query else ""
            return RedirectResponse(MODELS_REDIRECT_URL + query, status_code=307)
        if not self._authorized(request):
            return JSONResponse({"code": 401, "msg": "Not authenticated"}, status_code=401)
        return await self.models_list(request)

    async def models_list(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [self._model_row(s) for s in catalog.CATALOG]})

    async def models_running(self, request: Request) -> Response:
        def detail(i: Instance) -> dict[str, Any]:
            return {
                "model_id": i.spec.model_id,
                "display_name": i.spec.name,
                "port": i.port,
                "status": i.status,
                "active_request_count": i.active_request_count,
                "npu_usage": i.spec.npu_usage,
                "created_at": i.created_at,
                "use_time": round(i.use_time, 1),
                "last_inference_time": i.last_inference_time or None,
                "type": i.spec.type,
                "capabilities": [i.spec.capability],
                "input": i.spec.input,
                "output": i.spec.output,
                "instance_id": i.instance_id,
                "startup_session_id": i.startup_session_id,
            }

        insts = list(self.state.instances.values())
        running = [i for i in insts if i.status == "running"]
        pending = [i for i in insts if i.status != "running"]
        return JSONResponse(
            {
                "object": "list",
                "running": [i.spec.model_id for i in running],
                "pending": [i.spec.model_id for i in pending],
                "instances": {
                    "running": [detail(i) for i in running],
                    "pending": [detail(i) for i in pending],
                },
            }
        )

    async def models_unload_candidate(self, request: Request) -> Response:
        spec = self._spec(request.path_params["id"])
        return JSONResponse(self.state.unload_candidate(spec))

    async def models_launch(self, request: Request) -> Response:
        model_id = request.path_params["id"]
        spec = MODELS.get(model_id)
        if spec is None:
            raise mgmt_error(400, "Error starting model.", f"{model_id} is not downloaded")
        status, body = self.state.launch(spec)
        return JSONResponse(body, status_code=status)

    async def models_stop(self, request: Request) -> Response:
        model_id = request.path_params["id"]
        spec = MODELS.get(model_id)
        if spec is None:
            raise mgmt_error(400, "Error stopping model.", f"{model_id} is not running")
        status, body = await self.state.stop(spec)
        return JSONResponse(body, status_code=status)

    async def models_unload_all(self, request: Request) -> Response:
        return JSONResponse({"removed_container_ids": self.state.unload_all()})

    async def v1_models(self, request: Request) -> Response:
        running = [i for i in self.state.instances.values() if i.status == "running"]
        first_chat = next((i for i in running if i.spec.kind == "chat"), None)
        data = []
        for i in running:
            s = i.spec
            data.append(
                {
                    "id": s.model_id,
                    "object": "model",
                    "created": int(i.created_at),
                    "owned_by": "llamacpp" if s.kind == "chat" else "mirage",
                    "aliases": ["default"] if i is first_chat else [],
                    "supports_vision": "Image" in s.input and s.kind == "chat",
                    "supports_chat": s.kind == "chat",
                    "thinking": s.thinking
                    or {
                        "supported": False,
                        "toggleable": False,
                        "enabled_by_default": False,
                        "levels": [],
                        "default_level": None,
                    },
                    "context_window": s.context_window,
                }
            )
        return JSONResponse({"object": "list", "data": data})

    # ======================================================================================================
    # video
    # ======================================================================================================
    def _video_json(self, job: VideoJob) -> dict[str, Any]:
        self.state.refresh_video(job)
        return {
            "id": job.id,
            "object": "video",
            "model": job.model,
            "status": job.status,
            "progress": self.state.video_progress(job),
            "created_at": job.created_at,
            "completed_at": job.completed_at,
            "expires_at": None,
            "prompt": job.prompt,
            "size": job.size,
            "seconds": f"{job.seconds:g}",
            "steps": job.steps,
            "seed": job.seed,
            "error": job.error,
            "remixed_from_video_id": None,
        }

    async def video_info(self, request: Request) -> Response:
        inst = self._model(("video",), request.query_params.get("model"), "video generation")
        return JSONResponse(
            {
                "model": inst.spec.model_id,
                "canvases": [f"{w}x{h}" for w, h in catalog.VIDEO_CANVASES],
                "step_options": list(catalog.VIDEO_STEP_OPTIONS),
                "default_steps": catalog.VIDEO_DEFAULT_STEPS,
                "fps": catalog.VIDEO_FPS,
                "max_keyframes": catalog.VIDEO_MAX_KEYFRAMES,
                "audio": dict(catalog.VIDEO_AUDIO),
            }
        )

    async def video_create(self, request: Request) -> Response:
        st = self.state
        body = await self._json(request)
        inst = self._model(("video",), body.get("model"), "video generation")
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise oai_error(400, "prompt is required", param="prompt")
        size = str(body.get("size") or "832x480")
        m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", size)
        if not m:
            raise oai_error(400, f"size must be 'WIDTHxHEIGHT', got {size!r}", param="size")
        width, height = int(m[1]), int(m[2])
        try:
            seconds = float(body.get("seconds", "4"))
            steps = int(body.get("steps", catalog.VIDEO_DEFAULT_STEPS))
            seed = int(body["seed"]) if body.get("seed") is not None else random.randint(0, 2**31 - 1)
        except (TypeError, ValueError) as exc:
            raise oai_error(400, f"invalid seconds/steps/seed: {exc}") from exc
        if seconds <= 0:
            raise oai_error(400, "seconds must be positive", param="seconds")
        if steps not in catalog.VIDEO_STEP_OPTIONS:
            raise oai_error(400, f"steps must be one of {list(catalog.VIDEO_STEP_OPTIONS)}", param="steps")
        image = body.get("image")
        if image is not None and not (isinstance(image, str) and image.startswith("data:image/")):
            raise oai_error(400, "image must be a data URI (data:image/...;base64,...)", param="image")
        on_canvas = (width, height) in catalog.VIDEO_CANVASES
        if not on_canvas and not st.q("canvas_check"):
            raise oai_error(400, f"size {size} is not one of the model's canvases", param="size")
        if seconds > catalog.VIDEO_MAX_SECONDS and not st.q("video_seconds_cap"):
            raise oai_error(400, f"seconds must be at most {catalog.VIDEO_MAX_SECONDS}", param="seconds")
        self._first_inference(inst)
        job = VideoJob(
            id=f"video_{uuid.uuid4().hex}",
            model=inst.spec.model_id,
            prompt=prompt,
            width=width,
            height=height,
            seconds=seconds,
            steps=steps,
            seed=seed,
            created_at=_now(),
            created_dev=st.clock.now(),
        )
        st.videos[job.id] = job
        st.counters.renders_submitted += 1
        job.task = st.spawn(self._render(job, on_canvas))
        return JSONResponse(self._video_json(job))

    async def _render(self, job: VideoJob, on_canvas: bool) -> None:
        st = self.state
        async with st.work():
            if job.seconds > catalog.VIDEO_MAX_SECONDS:
                frames = int(round(job.seconds * catalog.VIDEO_FPS)) + 1
                audio = int(round(job.seconds * catalog.VIDEO_AUDIO["sample_rate"]))
                job.fail(
                    "GENERATION_FAILED",
                    f"no exported bucket fits a request needing [audio={audio}, target_video={frames}]",
                )
                return
            async with st.compute():
                if job.status != "queued":
                    return  # failed (timeout) or deleted while waiting in line
                job.status, job.started_dev, job.rendering = "in_progress", st.clock.now(), True
                if not on_canvas:
                    await st.clock.sleep(3.0)
                    job.fail(
                        "GENERATION_FAILED",
                        f"size {job.size} is not an exported canvas "
                        f"({', '.join(f'{w}x{h}' for w, h in catalog.VIDEO_CANVASES)})",
                    )
                    return
                job.duration = catalog.video_render_seconds(job.width, job.height, job.seconds, job.steps)
                # Encode the MP4 while the "render" runs so it is ready when the clock says done; skip it
                # for a render the gateway will have given up on (nobody can fetch its content).
                doomed = st.q("generation_timeout") and (
                    job.started_dev + job.duration - job.created_dev >= catalog.VIDEO_GATEWAY_LIMIT_S
                )
                media = None if doomed else st.spawn(st.in_thread(self._encode, job=job))
                await st.clock.sleep_until(job.started_dev + job.duration)
                st.refresh_video(job)
                if job.status != "in_progress":
                    return  # timed out: the NPU was busy to the end, but there is no result
                try:
                    path = await (media or st.in_thread(self._encode, job=job))
                except Exception as exc:  # noqa: BLE001 - any encoder failure is reported on the job
                    job.fail("GENERATION_FAILED", f"render failed: {exc}")
                    return
                job.rendering = False
                if job.status == "in_progress":
                    job.status, job.path, job.completed_at = "completed", path, _now()
                    st.counters.renders_completed += 1
                    st.save_finished_videos()

    @staticmethod
    def _encode(job: VideoJob) -> Any:
        return _media().video_mp4(
            prompt=job.prompt,
            seconds=job.seconds,
            width=job.width,
            height=job.height,
            fps=catalog.VIDEO_FPS,
            audio=True,
            audio_rate=catalog.VIDEO_AUDIO["sample_rate"],
            audio_channels=catalog.VIDEO_AUDIO["channels"],
            seed=job.seed,
        )

    def _video(self, request: Request) -> VideoJob:
        job = self.state.videos.get(request.path_params["id"])
        if job is None:
            raise oai_error(404, f"Video {request.path_params['id']} not found", code="video_not_found")
        return job

    async def video_list(self, request: Request) -> Response:
        jobs = sorted(self.state.videos.values(), key=lambda j: j.created_dev, reverse=True)
        data = [self._video_json(j) for j in jobs]
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
                "has_more": False,
            }
        )

    async def video_get(self, request: Request) -> Response:
        return JSONResponse(self._video_json(self._video(request)))

    async def video_delete(self, request: Request) -> Response:
        st = self.state
        job = self._video(request)
        del st.videos[job.id]
        if job.task is not None and not job.task.done():
            if st.q("delete_does_not_stop"):
                st.detach_video(job)  # the render goes on and keeps the NPU busy
            else:
                job.task.cancel()
        return JSONResponse({"id": job.id, "object": "video.deleted", "deleted": True})

    async def video_content(self, request: Request) -> Response:
        job = self._video(request)
        self.state.refresh_video(job)
        if job.status != "completed" or job.path is None:
            raise oai_error(
                409, f"Video {job.id} is not completed (status: {job.status})", code="video_not_ready"
            )
        if (cut := self._maybe_cut(job.path, "video/mp4")) is not None:
            return cut
        return FileResponse(job.path, media_type="video/mp4", filename=f"{job.id}.mp4")

    # ======================================================================================================
    # 3D (Hunyuan3D-2.1 behind /v1/3d, a FastAPI "Image-to-3D Server" 2.0.0)
    # ======================================================================================================
    STAGE_INPUTS: dict[str, tuple[str, ...]] = {
        "shape": ("image",),
        "simplify": ("mesh",),
        "texture": ("mesh", "image"),
        "export": ("mesh",),
        "background": ("image",),
    }

    async def td_capabilities(self, request: Request) -> Response:
        inst = self._model(("3d",), request.query_params.get("model"), "3D generation")
        return JSONResponse(
            {
                "server": "Image-to-3D Server",
                "version": "2.0.0",
                "model": inst.spec.model_id,
                "stages": list(self.STAGE_INPUTS),
                "stage_inputs": {k: list(v) for k, v in self.STAGE_INPUTS.items()},
                "files": ["image", "mesh", "material"],
                "params": {
                    "shape": {"seed": 1234, "steps": 30, "guidance_scale": 5.0, "octree_resolution": 256},
                    "simplify": {"target_faces": 40000},
                    "texture": {"seed": 1234, "resolution": 1024},
                    "export": {"format": "glb", "formats": ["glb", "obj"]},
                    "background": {},
                },
                "max_concurrent_tasks": 1,
                "task_statuses": ["queued", "running", "succeeded", "failed", "cancelled"],
            }
        )

    def _task_json(self, task: Task3D) -> dict[str, Any]:
        st = self.state
        progress = 0
        if task.status == "succeeded":
            progress = 100
        elif task.status == "running" and task.started_dev is not None and task.duration > 0:
            progress = max(0, min(99, int((st.clock.now() - task.started_dev) / task.duration * 100)))
        base = f"/v1/3d/tasks/{task.id}/artifacts"
        return {
            "task_id": task.id,
            "stage": task.stage,
            "status": task.status,
            "progress": progress,
            "params": task.params,
            "inputs": task.inputs,
            "created_at": task.created_at,
            "finished_at": task.finished_at,
            "error": task.error,
            "artifacts": [
                {"name": name, "media_type": mt, "size_bytes": len(data), "url": f"{base}/{name}"}
                for name, (data, mt) in task.artifacts.items()
            ],
        }

    async def td_create(self, request: Request) -> Response:
        st = self.state
        form = await request.form()
        try:
            inst = self._model(("3d",), str(form.get("model") or "") or None, "3D generation")
            stage = str(form.get("stage") or "")
            if stage not in self.STAGE_INPUTS:
                raise Reply(400, {"detail": f"stage must be one of {', '.join(self.STAGE_INPUTS)}"})
            try:
                params = json.loads(str(form.get("params") or "{}"))
                if not isinstance(params, dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                raise Reply(400, {"detail": f"params must be a JSON object: {exc}"}) from exc
            inputs: dict[str, int] = {}
            for fname in ("image", "mesh", "material"):
                upload = form.get(fname)
                if upload is not None and hasattr(upload, "read"):
                    inputs[fname] = len(await upload.read())
            missing = [f for f in self.STAGE_INPUTS[stage] if not inputs.get(f)]
            if missing:
                raise Reply(400, {"detail": f"stage '{stage}' needs file(s): {', '.join(missing)}"})
            self._first_inference(inst)
        finally:
            await form.close()
        task = Task3D(id=str(uuid.uuid4()), stage=stage, params=params, inputs=inputs, created_at=_now())
        st.tasks3d[task.id] = task
        st.counters.tasks_submitted += 1
        task.task = st.spawn(self._run_stage(task))
        return JSONResponse(self._task_json(task))

    async def _run_stage(self, task: Task3D) -> None:
        st = self.state
        async with st.work(), st.compute():
            if task.status != "queued":
                return
            task.status, task.started_dev = "running", st.clock.now()
            task.duration = catalog.THREE_D_STAGE_SECONDS[task.stage]
            if task.stage == "background" and st.q("hunyuan_background"):
                await st.clock.sleep(3.0)
                task.finish(
                    "failed",
                    {
                        "code": "STAGE_FAILED",
                        "message": "background removal failed: BriefNet model is missing",
                    },
                )
                return
            artifacts = st.spawn(st.in_thread(self._stage_artifacts, task=task))
            await st.clock.sleep(task.duration)
            result = await artifacts
            if task.status == "running":
                task.artifacts = result
                task.finish("succeeded")

    @staticmethod
    def _stage_artifacts(task: Task3D) -> dict[str, tuple[bytes, str]]:
        media = _media()
        seed = int(task.params.get("seed", 0) or 0)
        if task.stage == "background":
            return {
                "image_nobg.png": (
                    media.png_bytes(prompt="background removed", width=512, height=512, seed=seed),
                    "image/png",
                )
            }
        if task.stage == "export" and str(task.params.get("format", "glb")).lower() == "obj":
            obj = "o mesh\nv 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 2 3\nf 1 2 4\nf 1 3 4\nf 2 3 4\n"
            return {"model.obj": (obj.encode(), "text/plain")}
        names = {
            "shape": "shape.glb",
            "simplify": "shape_simplified.glb",
            "texture": "textured.glb",
            "export": "model.glb",
        }
        textured = task.stage in ("texture", "export")
        return {names[task.stage]: (media.glb_bytes(textured=textured, seed=seed), "model/gltf-binary")}

    def _task(self, request: Request) -> Task3D:
        task = self.state.tasks3d.get(request.path_params["id"])
        if task is None:
            raise Reply(404, {"detail": "Task not found"})
        return task

    async def td_list(self, request: Request) -> Response:
        return JSONResponse({"tasks": [self._task_json(t) for t in self.state.tasks3d.values()]})

    async def td_get(self, request: Request) -> Response:
        return JSONResponse(self._task_json(self._task(request)))

    async def td_cancel(self, request: Request) -> Response:
        task = self._task(request)
        if task.status not in ("queued", "running"):
            raise Reply(409, {"detail": f"Task is already {task.status}"})
        task.finish("cancelled")
        if task.task is not None:
            task.task.cancel()
        return JSONResponse(self._task_json(task))

    async def td_artifacts(self, request: Request) -> Response:
        return JSONResponse(
            {
                "task_id": request.path_params["id"],
                "artifacts": self._task_json(self._task(request))["artifacts"],
            }
        )

    async def td_artifact(self, request: Request) -> Response:
        task = self._task(request)
        item = task.artifacts.get(request.path_params["name"])
        if item is None:
            raise Reply(404, {"detail": "Artifact not found"})
        data, media_type = item
        return Response(
            data,
            media_type=media_type,
            headers={"Content-Disposition": f'attachment; filename="{request.path_params["name"]}"'},
        )

    # ======================================================================================================
    # music
    # ======================================================================================================
    @staticmethod
    def _music_env(**kw: Any) -> dict[str, Any]:
        env: dict[str, Any] = {
            "audio_data": None,
            "audio_format": "wav",
            "audio_outputs": {},
            "channels": 0,
            "duration": 0.0,
            "error": None,
            "error_code": None,
            "error_details": {},
            "metadata": {},
            "prompt": None,
            "sample_count": 0,
            "sample_rate": 0,
            "session_id": None,
            "success": True,
        }
        env.update(kw)
        return env

    def _music_fail(self, status: int, message: str, code: str, **kw: Any) -> Reply:
        kw.setdefault("session_id", str(uuid.uuid4()))
        return Reply(status, self._music_env(success=False, error=message, error_code=code, **kw))

    async def music_info(self, request: Request) -> Response:
        running = [
            i
            for i in self.state.instances.values()
            if i.status == "running" and i.spec.kind in ("music_loop", "music_song")
        ]
        if not running:
            raise oai_error(503, "No suitable model is currently running.", "service_unavailable")
        models = []
        for i in running:
            song = i.spec.kind == "music_song"
            models.append(
                {
                    "model_id": i.spec.model_id,
                    "server": "Text-to-Music Server",
                    "version": "1.0.0",
                    "sample_rate": 48000 if song else 44100,
                    "channels": 2,
                    "max_seconds": 240 if song else 47,
                    "routes": (
                        ["/v1/music/generate/preview", "/v1/music/generate/resume"]
                        if song
                        else ["/v1/music/generate", "/v1/music/generate/wav"]
                    ),
                    "generation_types": ["mixed", "bgm", "vocal", "separate"] if song else [],
                }
            )
        return JSONResponse({"models": models})

    async def music_sessions(self, request: Request) -> Response:
        return JSONResponse(
            {
                "sessions": [
                    {
                        "session_id": s.id,
                        "model": s.model,
                        "stage": s.stage,
                        "status": "completed",
                        "prompt": s.prompt,
                        "duration": s.duration,
                        "seconds_total": s.seconds_total,
                        "sample_rate": s.sample_rate,
                        "channels": s.channels,
                        "created_at": s.created_at,
                    }
                    for s in self.state.sessions.values()
                ]
            }
        )

    async def music_download(self, request: Request) -> Response:
        sid = request.path_params["id"]
        sess = self.state.sessions.get(sid)
        if sess is None:
            raise self._music_fail(404, f"Session not found: {sid}", "SESSION_NOT_FOUND", session_id=sid)
        fmt = request.query_params.get("format", "wav").lower()
        if fmt not in ("wav", "mp3"):
            raise self._music_fail(400, "format must be mp3 or wav", "INVALID_REQUEST", session_id=sid)
        if fmt == "mp3":
            data = await self.state.in_thread(
                _media().mp3_bytes,
                seconds=sess.duration,
                sample_rate=sess.sample_rate,
                channels=sess.channels,
                seed=sess.seed,
            )
            return Response(data, media_type="audio/mpeg")
        data = await self._music_wav(sess.duration, sess.sample_rate, sess.channels, sess.seed)
        return Response(data, media_type="audio/wav")

    async def _music_wav(self, seconds: float, rate: int, channels: int, seed: int) -> bytes:
        return await self.state.in_thread(
            _media().wav_bytes, seconds=seconds, sample_rate=rate, channels=channels, seed=seed, kind="music"
        )

    def _music_model(self, body: dict[str, Any]) -> Instance:
        return self._model(("music_loop", "music_song"), body.get("model"), "music generation")

    @staticmethod
    def _cfg(body: dict[str, Any]) -> dict[str, Any]:
        cfg = body.get("config") or {}
        if not isinstance(cfg, dict):
            raise oai_error(400, "config must be an object", param="config")
        return cfg

    @staticmethod
    def _seed(cfg: dict[str, Any]) -> int:
        seed = cfg.get("seed")
        return int(seed) if isinstance(seed, int | float) and seed >= 0 else random.randint(0, 2**31 - 1)

    async def _loop(self, inst: Instance, body: dict[str, Any]) -> tuple[MusicSession, bytes]:
        """Foundation-1: one loop of config.seconds_total (default 20 s), 44.1 kHz stereo."""
        cfg = self._cfg(body)
        prompt = body.get("prompt") or cfg.get("prompt") or cfg.get("caption")
        if not prompt:
            raise oai_error(
                400, "config.lyrics, config.caption, config.instruction, or prompt field is required"
            )
        seconds = float(cfg.get("seconds_total") or body.get("duration") or 20)
        self._first_inference(inst)
        seed = self._seed(cfg)
        wav = await self._infer_making(
            inst, catalog.music_loop_seconds(seconds), lambda: self._music_wav(seconds, 44100, 2, seed)
        )
        return self._new_session(inst, str(prompt), cfg, seconds, 44100, stage="full", seed=seed), wav

    def _new_session(
        self,
        inst: Instance,
        prompt: str,
        cfg: dict[str, Any],
        seconds_total: float,
        rate: int,
        *,
        stage: str,
        duration: float | None = None,
        seed: int | None = None,
    ) -> MusicSession:
        sess = MusicSession(
            id=str(uuid.uuid4()),
            model=inst.spec.model_id,
            prompt=prompt,
            config=cfg,
            seconds_total=seconds_total,
            sample_rate=rate,
            channels=2,
            seed=self._seed(cfg) if seed is None else seed,
            created_at=_now(),
            stage=stage,
            duration=seconds_total if duration is None else duration,
        )
        self.state.sessions[sess.id] = sess
        return sess

    def _env_for(self, sess: MusicSession, wav: bytes) -> dict[str, Any]:
        return self._music_env(
            audio_data=base64.b64encode(wav).decode(),
            channels=sess.channels,
            duration=sess.duration,
            prompt=sess.prompt,
            sample_count=int(sess.duration * sess.sample_rate),
            sample_rate=sess.sample_rate,
            session_id=sess.id,
            metadata={"model": sess.model, "stage": sess.stage, "seconds_total": sess.seconds_total},
        )

    def _song_checks(self, body: dict[str, Any], allowed: tuple[str, ...]) -> None:
        extra = [k for k in body if k not in allowed]
        if extra and self.state.q("songgen_session"):
            # SongGeneration's request model forbids extra fields; everything belongs inside config.
            raise self._music_fail(
                400,
                f"Extra inputs are not permitted in request: {extra[0]}",
                "INVALID_REQUEST",
                prompt=body.get("prompt"),
            )

    async def music_generate_wav(self, request: Request) -> Response:
        body = await self._json(request)
        inst = self._music_model(body)
        if inst.spec.kind != "music_loop":
            raise self._music_fail(404, "generate/wav is not supported by this model", "NOT_SUPPORTED")
        _, wav = await self._loop(inst, body)
        return Response(wav, media_type="audio/wav")

    async def music_generate(self, request: Request) -> Response:
        body = await self._json(request)
        inst = self._music_model(body)
        if inst.spec.kind == "music_loop":
            sess, wav = await self._loop(inst, body)
            return JSONResponse(self._env_for(sess, wav))
        self._song_checks(body, ("model", "config", "session_id"))
        if self.state.q("songgen_session"):
            # Plain /generate looks up a preview session that does not exist (field notes §8.1).
            sid = str(body.get("session_id") or uuid.uuid4())
            raise self._music_fail(
                404,
                f"Session not found: {sid}",
                "SESSION_NOT_FOUND",
                session_id=sid,
                prompt=body.get("prompt"),
            )
        cfg = self._cfg(body)
        caption = cfg.get("caption") or cfg.get("lyrics") or body.get("prompt")
        if not caption:
            raise oai_error(
                400, "config.lyrics, config.caption, config.instruction, or prompt field is required"
            )
        seconds = float(cfg.get("seconds_total") or 60)
        self._first_inference(inst)
        seed = self._seed(cfg)
        wav = await self._infer_making(
            inst, catalog.song_seconds(seconds), lambda: self._music_wav(seconds, 48000, 2, seed)
        )
        sess = self._new_session(inst, str(caption), cfg, seconds, 48000, stage="full", seed=seed)
        return JSONResponse(self._env_for(sess, wav))

    async def music_preview(self, request: Request) -> Response:
        body = await self._json(request)
        inst = self._music_model(body)
        if inst.spec.kind != "music_song":
            raise self._music_fail(404, "generate/preview is not supported by this model", "NOT_SUPPORTED")
        self._song_checks(body, ("model", "config"))
        cfg = self._cfg(body)
        caption = cfg.get("caption") or cfg.get("lyrics") or cfg.get("instruction") or body.get("prompt")
        if not caption:
            raise oai_error(
                400, "config.lyrics, config.caption, config.instruction, or prompt field is required"
            )
        if cfg.get("preview_seconds") in (None, ""):
            raise self._music_fail(400, "preview_seconds must be set", "INVALID_REQUEST")
        seconds_total = float(cfg.get("seconds_total") or 60)
        preview = min(float(cfg["preview_seconds"]), seconds_total)
        self._first_inference(inst)
        seed = self._seed(cfg)
        wav = await self._infer_making(
            inst, catalog.song_seconds(preview), lambda: self._music_wav(preview, 48000, 2, seed)
        )
        sess = self._new_session(
            inst, str(caption), cfg, seconds_total, 48000, stage="preview", duration=preview, seed=seed
        )
        return JSONResponse(self._env_for(sess, wav))

    async def music_resume(self, request: Request) -> Response:
        body = await self._json(request)
        inst = self._music_model(body)
        self._song_checks(body, ("model", "config", "session_id"))
        sid, cfg = body.get("session_id"), body.get("config")
        if not sid or not isinstance(cfg, dict):
            raise self._music_fail(
                400, "session_id and config are required", "INVALID_REQUEST", session_id=sid or None
            )
        sess = self.state.sessions.get(str(sid))
        if sess is None or sess.model != inst.spec.model_id:
            raise self._music_fail(404, f"Session not found: {sid}", "SESSION_NOT_FOUND", session_id=sid)
        if not self.state.q("songgen_session") and cfg.get("seconds_total"):
            # The ideal device honours a new length; the real one ignores it (songgen_session).
            sess.seconds_total = float(cfg["seconds_total"])
        self._first_inference(inst)
        total = sess.seconds_total
        wav = await self._infer_making(
            inst, catalog.song_seconds(total), lambda: self._music_wav(total, 48000, 2, sess.seed)
        )
        sess.stage, sess.duration = "full", total
        return JSONResponse(self._env_for(sess, wav))

    # ======================================================================================================
    # images
    # ======================================================================================================
    async def images_generate(self, request: Request) -> Response:
        st = self.state
        body = await self._json(request)
        inst = self._model(("image",), body.get("model"), "image generation")
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise oai_error(400, "prompt is required", param="prompt")
        m = re.fullmatch(r"(\d+)x(\d+)", str(body.get("size") or "1024x1024"))
        if (
            not m
            or int(m[1]) % 16
            or int(m[2]) % 16
            or not (256 <= int(m[1]) <= 2048 and 256 <= int(m[2]) <= 2048)
        ):
            raise oai_error(
                400, f"size must be WIDTHxHEIGHT in multiples of 16, got {body.get('size')!r}", param="size"
            )
        width, height = int(m[1]), int(m[2])
        n = int(body.get("n") or 1)
        if n < 1:
            raise oai_error(400, "n must be >= 1", param="n")
        if n > 1 and st.q("single_image"):
            raise oai_error(
                500,
                f"Image generation failed: only one image per request is supported (n={n})",
                "server_error",
            )
        if (body.get("image") or body.get("images")) and "Image Editing" not in inst.spec.supported:
            raise oai_error(
                400, f"Model '{inst.spec.model_id}' does not support image editing.", param="model"
            )
        fmt = body.get("response_format") or "b64_json"
        if fmt not in ("b64_json", "url"):
            raise oai_error(400, "response_format must be b64_json or url", param="response_format")
        steps = int(body.get("steps") or 9)
        seed = int(body["seed"]) if body.get("seed") is not None else random.randint(0, 2**31 - 1)
        self._first_inference(inst)
        data = []
        for k in range(n):
            png = await self._infer_making(
                inst,
                catalog.image_seconds(width, height, steps),
                lambda k=k: st.in_thread(
                    _media().png_bytes, prompt=prompt, width=width, height=height, seed=seed + k
                ),
            )
            if fmt == "url":
                name = f"img_{uuid.uuid4().hex}.png"
                st.images[name] = png
                data.append({"url": f"{request.base_url}v1/images/files/{name}", "revised_prompt": None})
            else:
                data.append({"b64_json": base64.b64encode(png).decode(), "revised_prompt": None})
        return JSONResponse({"created": _now(), "data": data})

    async def images_file(self, request: Request) -> Response:
        png = self.state.images.get(request.path_params["name"])
        if png is None:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        return Response(png, media_type="image/png")

    # ======================================================================================================
    # speech
    # ======================================================================================================
    def _tts_problem(self, spec: ModelSpec, body: dict[str, Any]) -> bool:
        """True when this request does not suit the model (API doc "which voice to send")."""
        st = self.state
        if spec.tts_mode == "broken" and st.q("supertonic_broken"):
            return True  # the API passes the full id; Supertonic's server only accepts "Supertonic-3"
        if not st.q("tts_voice_check"):
            return False
        voice = body.get("voice")
        if spec.tts_mode == "design":
            return voice is not None or not body.get("instruct")
        if spec.tts_mode == "clone":
            return not (body.get("ref_audio") and body.get("ref_text"))
        if spec.model_id == "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice" and voice in (None, "alloy"):
            return False  # CustomVoice falls back to its default speaker
        return voice is not None and voice not in spec.speakers

    async def speech(self, request: Request) -> Response:
        body = await self._json(request)
        inst = self._model(("tts",), body.get("model"), "speech")
        text = body.get("input")
        if not isinstance(text, str) or not text.strip():
            raise oai_error(400, "input is required", param="input")
        fmt = body.get("response_format") or "wav"
        if fmt not in ("wav", "pcm", "mp3"):
            raise oai_error(400, "response_format must be wav, pcm or mp3", param="response_format")
        self._first_inference(inst)
        if self._tts_problem(inst.spec, body):
            raise oai_error(500, "The upstream TTS model failed.", "upstream_error")
        seconds = min(120.0, max(0.8, len(text.split()) * 0.4))
        seed = sum(text.encode()) % 997
        if fmt == "mp3":
            data = await self._infer_making(
                inst,
                catalog.speech_seconds(seconds),
                lambda: self.state.in_thread(
                    _media().mp3_bytes, seconds=seconds, sample_rate=24000, channels=1, seed=seed
                ),
            )
            return Response(data, media_type="audio/mpeg")
        wav = await self._infer_making(
            inst,
            catalog.speech_seconds(seconds),
            lambda: self.state.in_thread(
                _media().wav_bytes, seconds=seconds, sample_rate=24000, channels=1, seed=seed, kind="speech"
            ),
        )
        if fmt == "pcm":
            return Response(wav[44:], media_type="audio/pcm")  # 16-bit LE mono 24 kHz, header stripped
        return Response(wav, media_type="audio/wav")

    # ======================================================================================================
    # chat (minimal: enough for a hub to check a chat model answers)
    # ======================================================================================================
    async def chat(self, request: Request) -> Response:
        body = await self._json(request)
        inst = self._model(
            ("chat",), None if body.get("model") in (None, "default") else body.get("model"), "chat"
        )
        self._first_inference(inst)
        return await tiiny_chat.complete(self, inst, body)


def create_app(options: Options | None = None) -> Starlette:
    """The emulator's ASGI app (discovery servers start in its lifespan)."""
    return TiinyApp(options or Options()).build()
