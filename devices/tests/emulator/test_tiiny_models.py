"""Model lifecycle on the Tiiny emulator: list, redirect, launch, running, fit, stop, after-load quirks."""

from __future__ import annotations

import time
from urllib.parse import quote

import httpx

from devices.emulator.catalog import MODELS

from .tiiny_helpers import CHAT, CUSTOM_VOICE, HUNYUAN, VIDEO, ZIMAGE, running_ids, wait_for, wait_running

ROW_KEYS = {
    "id",
    "name",
    "fullname",
    "size",
    "params",
    "type",
    "status",
    "npu_usage",
    "load_time",
    "input",
    "supported",
    "desc",
    "capabilities",
    "model_id",
}


def test_it_lists_installed_models_with_the_documented_row(tiiny):
    with tiiny.client() as c:
        body = c.get("/api/v1/models/?including_downloading=false").json()
    rows = {r["id"]: r for r in body["data"]}
    assert body["object"] == "list"
    for mid in (
        VIDEO,
        HUNYUAN,
        ZIMAGE,
        CHAT,
        "RoyalCities/Foundation-1",
        "tencent/SongGeneration-v2-large",
        "Supertone/supertonic-3",
        CUSTOM_VOICE,
    ):
        assert ROW_KEYS <= rows[mid].keys(), mid
        assert rows[mid]["status"] == "stopped"
    assert rows["tencent/SongGeneration-v2-large"]["npu_usage"] == 28
    assert rows[CHAT]["thinking"]["supported"] is True
    assert rows[VIDEO]["load_time"] > 0


def test_it_redirects_models_without_slash_to_an_absolute_url(tiiny):
    resp = httpx.get(tiiny.base_url + "/api/v1/models", headers=tiiny.headers, follow_redirects=False)
    assert resp.status_code == 307
    assert resp.headers["location"] == "http://p8800.api.tiiny/api/v1/models/"


def test_it_serves_models_without_slash_with_the_redirect_quirk_off(tiiny):
    tiiny.disable_quirks("models_redirect")
    with tiiny.client() as c:
        resp = c.get("/api/v1/models")
    assert resp.status_code == 200 and resp.json()["data"]


def test_it_launches_asynchronously_pending_then_running(tiiny):
    tiiny.set_speed(20)  # Hunyuan3D loads in 40 device-s = 2 s here
    with tiiny.client() as c:
        resp = c.post(f"/api/v1/models/{HUNYUAN}/launch", json={"model_id": HUNYUAN})
        assert resp.status_code == 200
        assert resp.json() == {"message": f"start loading {HUNYUAN}", "progress": 0}
        running = c.get("/api/v1/models/running").json()
        assert running["running"] == [] and running["pending"] == [HUNYUAN]
        assert running["instances"]["pending"][0]["model_id"] == HUNYUAN
        npu = c.get("/api/v1/models/npu/status").json()
        assert npu["models"] == [{"model_id": HUNYUAN, "npu_usage": 30, "status": "loading"}]
        tiiny.set_speed(3000)
        wait_running(c, HUNYUAN)
        inst = c.get("/api/v1/models/running").json()["instances"]["running"][0]
        for key in (
            "model_id",
            "port",
            "status",
            "active_request_count",
            "npu_usage",
            "created_at",
            "use_time",
            "last_inference_time",
            "type",
            "capabilities",
            "input",
            "output",
            "instance_id",
            "startup_session_id",
        ):
            assert key in inst
        again = c.post(f"/api/v1/models/{HUNYUAN}/launch", json={"model_id": HUNYUAN}).json()
        assert again == {"message": f"{HUNYUAN} already running", "progress": 100}
        assert [m["id"] for m in c.get("/v1/models").json()["data"]] == [HUNYUAN]
    counters = tiiny.counters()
    assert counters["launches"] == 1 and counters["peak_concurrent_work"] == 1


def test_it_accepts_slash_ids_raw_and_percent_encoded(tiiny):
    with tiiny.client() as c:
        raw = c.get(f"/api/v1/models/{CHAT}/unload_candidate")
        encoded = c.get(f"/api/v1/models/{quote(CHAT, safe='')}/unload_candidate")
        assert raw.status_code == encoded.status_code == 200
        assert (
            raw.json()["target_model"]
            == encoded.json()["target_model"]
            == {"model_id": CHAT, "npu_usage": 55}
        )
        assert (
            c.post(f"/api/v1/models/{quote(ZIMAGE, safe='')}/launch", json={"model_id": ZIMAGE}).status_code
            == 200
        )
        wait_running(c, ZIMAGE)


def test_it_accepts_slash_ids_with_the_slash_ids_quirk_off(tiiny):
    tiiny.disable_quirks("slash_ids")
    with tiiny.client() as c:
        assert c.get(f"/api/v1/models/{quote(CHAT, safe='')}/unload_candidate").status_code == 200


def test_it_stops_models_and_refuses_to_stop_what_is_not_running(tiiny):
    tiiny.load(CHAT)
    with tiiny.client() as c:
        stopped = c.post(f"/api/v1/models/{CHAT}/stop")
        assert stopped.status_code == 200 and len(stopped.json()["removed_container_ids"]) == 1
        again = c.post(f"/api/v1/models/{CHAT}/stop")
        assert again.status_code == 400
        assert again.json() == {
            "code": 400,
            "msg": "Error stopping model.",
            "detail": f"{CHAT} is not running",
        }


def test_it_unloads_all(tiiny):
    tiiny.load(CHAT)
    tiiny.load(ZIMAGE)
    with tiiny.client() as c:
        body = c.post("/api/v1/models/unload_all").json()
        assert len(body["removed_container_ids"]) == 2
        assert running_ids(c) == []


def test_it_names_unload_candidates_when_a_model_does_not_fit(tiiny):
    tiiny.load(CHAT)  # 55
    tiiny.load(ZIMAGE)  # 32 -> 13 free
    with tiiny.client() as c:
        fits = c.get(f"/api/v1/models/{CUSTOM_VOICE}/unload_candidate").json()
        assert fits["unload_required"] is False and fits["model_id"] == []
        body = c.get(f"/api/v1/models/{HUNYUAN}/unload_candidate").json()
    assert body["unload_required"] is True
    assert body["target_model"] == {"model_id": HUNYUAN, "npu_usage": 30}
    assert body["candidate"]["model_id"] in (CHAT, ZIMAGE)
    assert body["npu_required"] == 30 and body["npu_available"] == 13
    assert "Not enough NPU RAM available" in body["message"]


def _fill_to_56_free(tiiny):
    for mid in (HUNYUAN, CUSTOM_VOICE, "Qwen/Qwen3-ASR-1.7B"):  # 30 + 7 + 7 = 44 used
        tiiny.load(mid)


def test_it_fakes_a_fit_when_the_npu_is_nearly_full_and_the_launch_vanishes(tiiny):
    _fill_to_56_free(tiiny)
    # The doomed launch shows as loading for DOOMED_LOAD_S device-seconds: 5 s here, so a loaded machine still
    # sees it pending (at the fixture's speed it vanished in milliseconds, before a busy box asked).
    tiiny.set_speed(2)
    with tiiny.client() as c:
        cand = c.get(f"/api/v1/models/{CHAT}/unload_candidate").json()
        assert cand["unload_required"] is False and cand["npu_available"] == 56
        assert c.post(f"/api/v1/models/{CHAT}/launch", json={"model_id": CHAT}).status_code == 200
        assert CHAT in c.get("/api/v1/models/running").json()["pending"]
        wait_for(lambda: CHAT not in str(c.get("/api/v1/models/npu/status").json()), what="launch to vanish")
        assert CHAT not in running_ids(c)


def test_it_really_loads_a_nearly_full_fit_with_fake_fit_off(tiiny):
    tiiny.disable_quirks("fake_fit")
    _fill_to_56_free(tiiny)
    with tiiny.client() as c:
        assert c.post(f"/api/v1/models/{CHAT}/launch", json={"model_id": CHAT}).status_code == 200
        wait_running(c, CHAT)


def test_it_refuses_an_over_budget_launch_with_fake_fit_off(tiiny):
    tiiny.disable_quirks("fake_fit")
    tiiny.load(CHAT)
    with tiiny.client() as c:
        resp = c.post("/api/v1/models/openai/gpt-oss-120b/launch", json={"model_id": "openai/gpt-oss-120b"})
    assert resp.status_code == 400
    assert resp.json()["msg"] == "Error starting model." and "NPU units" in resp.json()["detail"]


def test_it_fails_the_first_inference_after_a_load_with_xh2a(tiiny):
    tiiny.disable_quirks("bad_gateway_after_load")
    req = {"model": ZIMAGE, "prompt": "a cat", "size": "512x512"}
    with tiiny.client() as c:
        c.post(f"/api/v1/models/{ZIMAGE}/launch", json={"model_id": ZIMAGE})
        wait_running(c, ZIMAGE)
        first = c.post("/v1/images/generations", json=req)
        assert first.status_code == 500
        assert first.json()["error"]["message"] == "xh2a backend fail"
        assert c.post("/v1/images/generations", json=req).status_code == 200


def test_it_does_not_fail_after_a_load_with_xh2a_off(tiiny):
    tiiny.disable_quirks("bad_gateway_after_load", "xh2a_after_load")
    with tiiny.client() as c:
        c.post(f"/api/v1/models/{ZIMAGE}/launch", json={"model_id": ZIMAGE})
        wait_running(c, ZIMAGE)
        assert (
            c.post("/v1/images/generations", json={"prompt": "a cat", "size": "512x512"}).status_code == 200
        )


def test_it_answers_bad_gateway_right_after_a_load(tiiny):
    tiiny.set_speed(10)  # 10 device-s grace = 1 s
    tiiny.load(VIDEO, arm_quirks=True)
    with tiiny.client() as c:
        resp = c.get(f"/v1/video/info?model={VIDEO}")
        assert resp.status_code == 502
        assert resp.json() == {"error": {"message": "Bad Gateway", "type": "upstream_error"}}
        time.sleep(1.1)
        assert c.get(f"/v1/video/info?model={VIDEO}").status_code == 200


def test_it_serves_right_after_a_load_with_bad_gateway_off(tiiny):
    tiiny.set_speed(20)
    tiiny.disable_quirks("bad_gateway_after_load")
    tiiny.load(VIDEO, arm_quirks=True)
    with tiiny.client() as c:
        assert c.get(f"/v1/video/info?model={VIDEO}").status_code == 200


def test_it_lists_only_loaded_models_on_v1_models(tiiny):
    tiiny.load(CHAT)
    tiiny.load(ZIMAGE)
    with tiiny.client() as c:
        data = c.get("/v1/models").json()["data"]
    by_id = {m["id"]: m for m in data}
    assert set(by_id) == {CHAT, ZIMAGE}
    assert by_id[CHAT]["aliases"] == ["default"] and by_id[CHAT]["supports_chat"] is True
    assert by_id[ZIMAGE]["supports_chat"] is False
    for m in data:
        assert {"object", "owned_by", "supports_vision", "thinking", "context_window"} <= m.keys()


def test_it_launches_unknown_models_with_an_error_envelope(tiiny):
    with tiiny.client() as c:
        resp = c.post("/api/v1/models/nobody/nothing/launch", json={})
    assert resp.status_code == 400 and resp.json()["code"] == 400


def test_catalogue_has_every_model_kind():
    kinds = {m.kind for m in MODELS.values()}
    assert {"chat", "image", "video", "tts", "music_loop", "music_song", "3d"} <= kinds
