"""Client behaviour at the HTTP seam (httpx.MockTransport): what is sent, and how failures are typed."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from devices import errors
from devices.capabilities import Capabilities, VaultCap, vault_cap
from devices.clients import TensorSharpClient, TiinyClient
from devices.clients.base import validate_base_url

KEY = "0f1e2d3c-aaaa-bbbb-cccc-123456789abc"
BASE = "http://tiiny.local"


def client(handler, **kw) -> TiinyClient:
    return TiinyClient(BASE, KEY, transport=httpx.MockTransport(handler), sleep=lambda s: None, **kw)


def test_it_reissues_a_foreign_redirect_on_its_own_host_and_never_sends_the_key_elsewhere():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.host, request.url.path, request.headers.get("authorization")))
        if request.url.host != "tiiny.local":
            return httpx.Response(200, json={"data": []})
        if request.url.path == "/api/v1/models":
            return httpx.Response(307, headers={"location": "http://p8800.api.tiiny/api/v1/models/"})
        if request.url.path == "/api/v1/models/":
            return httpx.Response(200, json={"data": [{"model_id": "a/b", "npu_usage": 3}]})
        return httpx.Response(404)

    c = client(handler)
    resp = c.request("GET", "/api/v1/models", read=5)
    assert resp.status_code == 200
    assert [h for h, _, _ in seen] == ["tiiny.local", "tiiny.local"]
    assert seen[1][1] == "/api/v1/models/"
    assert all(auth == f"Bearer {KEY}" for _, _, auth in seen)


def test_it_url_encodes_model_ids():
    paths = []

    def handler(request):
        paths.append(request.url.raw_path.decode())
        return httpx.Response(200, json={"unload_required": False, "npu_required": 5, "npu_available": 50})

    client(handler).unload_candidate("Qwen/Qwen-Image 2.1")
    assert paths == ["/api/v1/models/Qwen%2FQwen-Image%202.1/unload_candidate"]


@pytest.mark.parametrize(
    ("status", "body", "expected", "permanent"),
    [
        (401, {"code": 401, "msg": "Not authenticated"}, errors.AuthFailed, True),
        (
            503,
            {"error": {"message": "No suitable model is currently running.", "type": "service_unavailable"}},
            errors.ModelNotLoaded,
            False,
        ),
        (
            404,
            {"error": {"code": 404, "message": '"x" is not loaded.', "type": "model_not_found"}},
            errors.ModelNotLoaded,
            False,
        ),
        (
            409,
            {"code": 409, "msg": "cleanup_failed", "detail": "physical_stop_failed: must be retried"},
            errors.CleanupFailed,
            False,
        ),
        (500, {"error": {"message": "xh2a backend fail", "type": "server_error"}}, errors.Transient, False),
        (
            400,
            {"code": 400, "msg": "Error starting model.", "detail": "x is not downloaded"},
            errors.BadRequest,
            True,
        ),
        (
            500,
            {"error": {"message": "Unsupported speaker: serena.", "type": "INVALID_REQUEST"}},
            errors.BadRequest,
            True,
        ),
        (504, {}, errors.Transient, False),
        (200, {"code": 150004, "message": "The operation failed to complete."}, errors.DeviceBusy, False),
    ],
)
def test_it_maps_failures_to_typed_errors(status, body, expected, permanent):
    c = client(lambda r: httpx.Response(status, json=body))
    with pytest.raises(expected) as info:
        c.launch("x")
    assert info.value.permanent is permanent
    assert info.value.human


def test_it_reports_a_vanished_video_id_as_not_found():
    c = client(lambda r: httpx.Response(404, json={"error": {"message": "No such video"}}))
    with pytest.raises(errors.NotFound):
        c.video_get("video_123")


def test_it_tells_locked_from_an_early_502_by_asking_the_system_service():
    def locked(request):
        return httpx.Response(502, text="<html>502 Bad Gateway</html>")

    with pytest.raises(errors.DeviceLocked) as info:
        client(locked).image_generate(model="m", prompt="p", size="512x512", timeout=5)
    assert "502" in info.value.detail

    def early(request):
        if request.url.path == "/api/v1/sys/status":
            return httpx.Response(200, json={"cpu": {"total_percent": 1}})
        return httpx.Response(502, json={"error": {"message": "Bad Gateway", "type": "upstream_error"}})

    with pytest.raises(errors.Transient):
        client(early).image_generate(model="m", prompt="p", size="512x512", timeout=5)


def test_it_maps_connection_failures_to_unreachable():
    def refuse(request):
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(errors.DeviceUnreachable):
        client(refuse).sys_status()

    def slow(request):
        raise httpx.ReadTimeout("timed out", request=request)

    with pytest.raises(errors.DeviceTimeout):
        client(slow).sys_status()


def test_it_accepts_both_running_shapes():
    bare = {"running": ["a/b"], "pending": ["c/d"]}
    nested = {"instances": {"running": [{"model_id": "a/b", "port": 9084}], "pending": [{"model_id": "c/d"}]}}
    for body in (bare, nested):
        state = client(lambda r, body=body: httpx.Response(200, json=body)).running()
        assert state.running == ["a/b"]
        assert state.pending == ["c/d"]


def test_it_falls_back_to_the_hardware_npu_status():
    def handler(request):
        if request.url.path == "/api/v1/models/npu/status":
            return httpx.Response(404, json={"detail": "Not Found"})
        return httpx.Response(
            200,
            json={
                "devices": [{"util_percent": 40.0, "mem_used_mb": 24512, "mem_total_mb": 49024}],
                "occupants": [],
            },
        )

    npu = client(handler).npu_status()
    assert npu["total"] == 100
    assert npu["used"] == 50
    assert npu["available"] == 50
    assert npu["util"] == 40.0


def test_it_treats_a_missing_vault_as_unknown():
    seen = []

    def handler(request):
        seen.append(request.url.path)
        return httpx.Response(404, json={"detail": "Not Found"})  # older firmware: no /kb

    c = client(handler)
    assert c.memory_schedule() == {} and c.memory_model() == {}
    assert seen == ["/kb/memory/schedule", "/kb/memory/model"]
    assert vault_cap({}, {}) == VaultCap() == Capabilities.from_dict({"kind": "tiiny"}).vault  # stored before


def test_it_reads_the_unit_npu_status():
    body = {
        "npu_total": 100,
        "npu_used": 55,
        "npu_available": 45,
        "models": [{"model_id": "Qwen/Qwen3.6-35B-A3B-turbo", "npu_usage": 55, "status": "running"}],
    }
    npu = client(lambda r: httpx.Response(200, json=body)).npu_status()
    assert npu["available"] == 45
    assert npu["models"][0]["model_id"] == "Qwen/Qwen3.6-35B-A3B-turbo"


def test_it_types_a_generation_timeout():
    err = TiinyClient.video_failure(
        {
            "status": "failed",
            "error": {"code": "GENERATION_TIMEOUT", "message": "exceeded the gateway time limit"},
        }
    )
    assert isinstance(err, errors.GenerationTimeout)
    assert err.permanent


def test_it_never_puts_the_key_in_repr_errors_or_logs(caplog):
    caplog.set_level(logging.DEBUG)

    def echo(request):  # a device that echoes the Authorization header back in its error
        return httpx.Response(400, json={"detail": f"bad header {request.headers['authorization']}"})

    c = client(echo)
    with pytest.raises(errors.BadRequest) as info:
        c.models()
    for text in (repr(c), str(info.value), repr(info.value), caplog.text):
        assert KEY not in text


def test_it_rejects_urls_with_credentials_or_odd_schemes():
    for bad in ("ftp://x", "http://user:pw@x", "http://", "http://x/?a=1", "file:///etc/passwd"):
        with pytest.raises(ValueError):
            validate_base_url(bad)
    assert validate_base_url("http://192.168.1.50/") == "http://192.168.1.50"


def test_it_refuses_to_download_from_another_host():
    ts = TensorSharpClient(
        "http://ts.local:5000", transport=httpx.MockTransport(lambda r: httpx.Response(200))
    )
    with pytest.raises(errors.BadRequest):
        ts.download("http://evil.example/uploads/x.mp4", "/tmp/never")


def _sse(*frames: dict) -> bytes:
    return b"".join(b"data: " + json.dumps(f).encode() + b"\n\n" for f in frames)


def test_it_streams_tensorsharp_frames_and_raises_on_an_error_frame():
    ok = _sse({"videoGen": True, "step": 1, "total": 2}, {"done": True, "url": "/uploads/video-1.mp4"})
    ts = TensorSharpClient(
        "http://ts.local",
        transport=httpx.MockTransport(
            lambda r: httpx.Response(200, content=ok, headers={"content-type": "text/event-stream"})
        ),
    )
    frames = list(ts.video_stream({"prompt": "p"}, read_timeout=5))
    assert frames[-1]["url"] == "/uploads/video-1.mp4"

    bad = _sse({"done": True, "error": "prompt is required."})
    ts = TensorSharpClient(
        "http://ts.local",
        transport=httpx.MockTransport(
            lambda r: httpx.Response(200, content=bad, headers={"content-type": "text/event-stream"})
        ),
    )
    with pytest.raises(errors.BadRequest) as info:
        list(ts.video_stream({}, read_timeout=5))
    assert info.value.detail == "prompt is required."

    cut = _sse({"videoGen": True, "step": 1, "total": 2})
    ts = TensorSharpClient(
        "http://ts.local",
        transport=httpx.MockTransport(
            lambda r: httpx.Response(200, content=cut, headers={"content-type": "text/event-stream"})
        ),
    )
    with pytest.raises(errors.Transient):
        list(ts.video_stream({"prompt": "p"}, read_timeout=5))


def test_it_builds_the_tls_settings_once_per_process_and_still_verifies(monkeypatch):
    """A client is made per job step (on the path from a render's end to the next request): loading the CA
    bundle for each one cost ~20 ms of CPU there."""
    import ssl

    from devices.clients import base

    built = []
    real = ssl.create_default_context

    def counting(*args, **kw):
        built.append(1)
        return real(*args, **kw)

    base._tls.cache_clear()
    monkeypatch.setattr(ssl, "create_default_context", counting)
    try:
        clients = [TiinyClient("https://pocket.local", "k") for _ in range(3)]
        assert len(built) == 1
        ctx = clients[0]._http._transport._pool._ssl_context
        assert ctx is clients[2]._http._transport._pool._ssl_context
        assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    finally:
        base._tls.cache_clear()
