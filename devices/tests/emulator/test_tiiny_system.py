"""System plane, auth, lock, discovery and the control API of the Tiiny emulator."""

from __future__ import annotations

import json
import socket

import httpx

from devices.emulator.quirks import ALL_QUIRKS
from devices.emulator.testing import run_tiiny

from .tiiny_helpers import CHAT, VIDEO, running_ids, wait_for, wait_video


def test_it_requires_a_bearer_key_on_device_routes(tiiny):
    for path in ("/api/v1/sys/status", "/api/v1/models/", "/v1/models", "/api/v1/models/running"):
        resp = httpx.get(tiiny.base_url + path)
        assert resp.status_code == 401
        assert resp.json() == {"code": 401, "msg": "Not authenticated"}
        bad = httpx.get(tiiny.base_url + path, headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401
    with tiiny.client() as c:
        assert c.get("/api/v1/sys/status").status_code == 200


def test_it_reports_sys_status_in_the_field_notes_shape(tiiny):
    with tiiny.client() as c:
        body = c.get("/api/v1/sys/status").json()
    assert isinstance(body["cpu"]["total_percent"], float)
    assert len(body["cpu"]["per_core_percent"]) == 12
    assert {"usage_percent", "used_bytes", "total_bytes"} <= body["memory"].keys()
    assert {"used_bytes", "total_bytes"} <= body["disk"].keys()
    assert "gpu" in body
    npu = body["npus"][0]
    assert npu["utilization_percent"] < 5
    assert 0 < npu["memory_used_mb"] < npu["memory_total_mb"]
    assert isinstance(npu["memory_total_mb"], float)


def test_it_moves_npu_memory_with_loaded_models(tiiny):
    with tiiny.client() as c:
        idle = c.get("/api/v1/sys/status").json()["npus"][0]["memory_used_mb"]
        tiiny.load(CHAT)
        loaded = c.get("/api/v1/sys/status").json()["npus"][0]["memory_used_mb"]
    assert loaded - idle > 20000  # 55 of 100 units of a 48 GB NPU


def test_it_reports_device_info(tiiny):
    with tiiny.client() as c:
        body = c.get("/api/v1/sys/device_info").json()
    assert body["tiiny_os"] == "0.1.38"
    assert body["device_model_name"] == "Tiiny z01"
    for key in ("cpu", "gpu", "dnpu", "peak_int8", "ram", "storage", "device_name", "version"):
        assert isinstance(body[key], str)


def test_it_reports_both_npu_views(tiiny):
    tiiny.load(CHAT)
    with tiiny.client() as c:
        units = c.get("/api/v1/models/npu/status").json()
        hw = c.get("/api/v1/npu/status").json()
    assert units == {
        "npu_total": 100,
        "npu_used": 55,
        "npu_available": 45,
        "models": [{"model_id": CHAT, "npu_usage": 55, "status": "running"}],
    }
    dev = hw["devices"][0]
    assert hw["hm_smi_available"] is True
    assert dev["mem_total_mb"] == 49024 and dev["temp_c"] is None and dev["power_w"] is None
    assert isinstance(dev["util_percent"], float)
    assert hw["npu"]["status"] == "ready"
    assert hw["occupants"][0]["activate_model"] == [CHAT]


def test_it_locks_after_a_power_cycle_until_unlocked(tiiny):
    tiiny.load(CHAT)
    tiiny.power_cycle()
    resp = httpx.get(tiiny.base_url + "/api/v1/sys/status", headers=tiiny.headers)
    assert resp.status_code == 502
    assert httpx.get(tiiny.base_url + "/v1/videos/x", headers=tiiny.headers).status_code == 502
    tiiny.unlock()
    with tiiny.client() as c:
        assert c.get("/api/v1/sys/status").status_code == 200
        assert running_ids(c) == []  # every model unloaded


def test_it_does_not_lock_after_a_power_cycle_with_the_quirk_off(tiiny):
    tiiny.disable_quirks("locked_after_power_cycle")
    tiiny.power_cycle()
    with tiiny.client() as c:
        assert c.get("/api/v1/sys/status").status_code == 200


def test_it_starts_locked_with_the_locked_flag():
    with run_tiiny(locked=True) as emu:
        assert httpx.get(emu.base_url + "/api/v1/sys/status", headers=emu.headers).status_code == 502
        emu.unlock()
        assert httpx.get(emu.base_url + "/api/v1/sys/status", headers=emu.headers).status_code == 200


def test_it_serves_device_json_without_auth(tiiny):
    resp = httpx.get(f"http://127.0.0.1:{tiiny.discovery_port}/device.json")
    assert resp.status_code == 200
    body = resp.json()
    assert body["discovery_token"] == "GADGET_DISCOVER_V1"
    assert body["service"]["http_port"] == tiiny.discovery_port
    assert body["service"]["udp_discovery_port"] == tiiny.udp_port
    assert body["backend"]["port"] == int(tiiny.base_url.rsplit(":", 1)[1])
    assert len(body["device_id"]) == 32
    assert body["serial_number"].startswith("TNY") and body["serial_number"].endswith("Q")
    for key in ("device_name", "hostname", "transport", "usb", "ipv4_addresses"):
        assert key in body


def test_it_answers_udp_discovery_only_to_the_right_token(tiiny):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(0.3)
        sock.sendto(b"HELLO", ("127.0.0.1", tiiny.udp_port))
        try:
            sock.recvfrom(65535)
            raise AssertionError("a wrong token must get no reply")
        except TimeoutError:
            pass
        sock.settimeout(2)
        sock.sendto(b"GADGET_DISCOVER_V1", ("127.0.0.1", tiiny.udp_port))
        data, _ = sock.recvfrom(65535)
    assert json.loads(data) == httpx.get(f"http://127.0.0.1:{tiiny.discovery_port}/device.json").json()


def test_it_switches_quirks_through_the_control_api(tiiny):
    body = tiiny.control("GET", "quirks")
    assert sorted(body["enabled"]) == sorted(ALL_QUIRKS) and body["all"] == list(ALL_QUIRKS)
    assert tiiny.set_quirks(["fake_fit"])["enabled"] == ["fake_fit"]
    assert "fake_fit" not in tiiny.disable_quirks("fake_fit")["enabled"]
    assert tiiny.set_quirks("none")["enabled"] == []
    assert httpx.post(tiiny.base_url + "/__emulator__/quirks", json={"enable": ["bogus"]}).status_code == 400
    assert sorted(tiiny.reset()["quirks"]) == sorted(ALL_QUIRKS)


def test_it_counts_requests_by_route_template(tiiny):
    with tiiny.client() as c:
        c.get("/v1/videos/video_abc")
        c.get("/v1/videos/video_def")
        c.get(f"/api/v1/models/{VIDEO}/unload_candidate")
    counters = tiiny.counters()
    assert counters["requests"]["GET /v1/videos/{id}"] == 2
    assert counters["requests"]["GET /api/v1/models/{id}/unload_candidate"] == 1
    for key in (
        "renders_submitted",
        "renders_completed",
        "launches",
        "inferences",
        "current_work",
        "peak_concurrent_work",
    ):
        assert counters[key] == 0
    tiiny.reset_counters()
    assert tiiny.counters()["requests"] == {}


def test_it_changes_speed_and_resets_it(tiiny):
    assert tiiny.set_speed(10)["speed"] == 10
    info = tiiny.info()
    assert info["speed"] == 10
    tiiny.reset()
    assert tiiny.info()["speed"] == 3000


def test_it_restarts_on_the_same_port():
    with run_tiiny() as emu:
        emu.load(CHAT)
        emu.restart()
        with emu.client() as c:
            assert c.get("/api/v1/sys/status").status_code == 200
            wait_for(lambda: running_ids(c) == [], what="fresh state")


def test_it_keeps_finished_videos_across_restarts_with_a_data_dir(tmp_path):
    # Not faster: the gateway's one-hour cut-off is 0.7 s of real time at 5000, less than a loaded machine may
    # take to write the MP4 (the render then "times out" before it is kept).
    with run_tiiny(speed=600, data_dir=tmp_path) as emu:
        emu.load(VIDEO)
        with emu.client() as c:
            body = {"model": VIDEO, "prompt": "kept", "size": "832x480", "seconds": "2", "steps": 4}
            job = c.post("/v1/videos", json=body).json()
            url = f"/v1/videos/{job['id']}"
            wait_video(c, job["id"])
            assert c.get(url).json()["status"] == "completed", c.get(url).json()
        emu.restart()
        with emu.client() as c:
            assert c.get(url).json()["status"] == "completed"
            assert c.get(url + "/content").content[4:8] == b"ftyp"
