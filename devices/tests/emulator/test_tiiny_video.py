"""Video jobs on the Tiiny emulator (MiniMax-H3-Turbo, /v1/videos) and their quirks."""

from __future__ import annotations

import time

import pytest

from devices.emulator.catalog import VIDEO_ANCHORS, video_render_seconds

from .tiiny_helpers import CHAT, VIDEO, ZIMAGE, npu_util, running_ids, wait_for, wait_running, wait_video


def _submit(c, **kw):
    body = {
        "model": VIDEO,
        "prompt": "a red fox in the snow",
        "size": "832x480",
        "seconds": "2",
        "steps": 4,
        "seed": 7,
        **kw,
    }
    resp = c.post("/v1/videos", json=body)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_render_time_formula_passes_through_the_documented_anchors():
    for w, h, s, steps, expected in VIDEO_ANCHORS:
        assert video_render_seconds(w, h, s, steps) == pytest.approx(expected, rel=1e-9)
    assert video_render_seconds(1344, 768, 7, 8) > 3600  # past the gateway's hour, as the doc saw
    assert video_render_seconds(832, 480, 2, 8) > video_render_seconds(832, 480, 2, 4)


def test_it_reports_video_info_for_the_loaded_model(tiiny):
    with tiiny.client() as c:
        none = c.get("/v1/video/info")
        assert none.status_code == 503
        assert none.json()["error"]["message"] == "No suitable model is currently running."
        named = c.get(f"/v1/video/info?model={VIDEO}")
        assert named.status_code == 404 and named.json()["error"]["type"] == "model_not_found"
        tiiny.load(VIDEO)
        body = c.get(f"/v1/video/info?model={VIDEO}").json()
    assert body["canvases"] == ["1344x768", "768x1344", "832x480", "480x832"]
    assert body["step_options"] == [4, 5, 6, 7, 8] and body["default_steps"] == 7
    assert body["fps"] == 24 and body["max_keyframes"] == 2
    assert body["audio"] == {"sample_rate": 32000, "channels": 2}


def test_it_renders_a_video_job_to_a_playable_mp4(tiiny):
    tiiny.load(VIDEO)
    tiiny.set_speed(600)  # 7 device-minutes = 0.7 s, long enough to watch it run
    with tiiny.client() as c:
        job = _submit(c)
        assert job["status"] == "queued" and job["id"].startswith("video_")
        assert job["size"] == "832x480" and job["seconds"] == "2" and job["progress"] == 0
        running = wait_video(c, job["id"], ("in_progress",))
        assert 0 <= running["progress"] < 100
        assert npu_util(c) > 90
        assert c.get(f"/v1/videos/{job['id']}/content").status_code == 409
        done = wait_video(c, job["id"])
        assert done["status"] == "completed" and done["progress"] == 100 and done["error"] is None
        assert isinstance(done["completed_at"], int)
        content = c.get(f"/v1/videos/{job['id']}/content")
        listing = c.get("/v1/videos").json()
        wait_for(lambda: npu_util(c) < 5, what="NPU idle")
    assert content.status_code == 200 and content.headers["content-type"] == "video/mp4"
    data = content.content
    assert data[4:8] == b"ftyp" and b"avc1" in data and b"mp4a" in data
    assert listing["object"] == "list" and [v["id"] for v in listing["data"]] == [job["id"]]
    counters = tiiny.counters()
    assert counters["renders_submitted"] == 1 and counters["renders_completed"] == 1
    assert counters["peak_concurrent_work"] == 1 and counters["current_work"] == 0
    assert counters["requests"]["POST /v1/videos"] == 1


def test_it_validates_video_requests(tiiny):
    with tiiny.client() as c:
        assert c.post("/v1/videos", json={"model": VIDEO, "prompt": "x"}).status_code == 404
        tiiny.load(VIDEO)
        assert c.post("/v1/videos", json={"model": VIDEO}).status_code == 400
        assert c.post("/v1/videos", json={"model": VIDEO, "prompt": "x", "steps": 12}).status_code == 400
        assert c.post("/v1/videos", json={"model": VIDEO, "prompt": "x", "size": "big"}).status_code == 400
        tiiny.load(CHAT)
        wrong = c.post("/v1/videos", json={"model": CHAT, "prompt": "x"})
        assert wrong.status_code == 400
        assert c.get("/v1/videos/video_nope").status_code == 404


def test_it_deletes_a_job_but_the_render_goes_on(tiiny):
    tiiny.load(VIDEO)
    tiiny.set_speed(600)
    with tiiny.client() as c:
        job = _submit(c)
        wait_video(c, job["id"], ("in_progress",))
        resp = c.delete(f"/v1/videos/{job['id']}")
        assert resp.json() == {"id": job["id"], "object": "video.deleted", "deleted": True}
        assert c.get(f"/v1/videos/{job['id']}").status_code == 404
        assert npu_util(c) > 90 and tiiny.counters()["current_work"] == 1
        wait_for(lambda: tiiny.counters()["current_work"] == 0, what="render to finish")


def test_it_stops_the_render_on_delete_with_delete_does_not_stop_off(tiiny):
    tiiny.disable_quirks("delete_does_not_stop")
    tiiny.load(VIDEO)
    tiiny.set_speed(100)  # 7 device-minutes = 4.2 s
    with tiiny.client() as c:
        job = _submit(c)
        wait_video(c, job["id"], ("in_progress",))
        assert c.delete(f"/v1/videos/{job['id']}").json()["deleted"] is True
        wait_for(lambda: tiiny.counters()["current_work"] == 0, timeout=1.5, what="render stopped at once")
        assert npu_util(c) < 5


def test_it_times_out_renders_after_an_hour_while_the_npu_stays_busy(tiiny):
    tiiny.load(VIDEO)
    tiiny.set_speed(10000)  # 77 device-minutes = 0.46 s
    with tiiny.client() as c:
        job = _submit(c, size="1344x768", seconds="7", steps=8)
        failed = wait_video(c, job["id"], ("failed",))
        assert failed["error"] == {
            "code": "GENERATION_TIMEOUT",
            "message": "video generation exceeded the gateway time limit",
        }
        assert npu_util(c) > 90  # the render goes on in the background
        wait_for(lambda: tiiny.counters()["current_work"] == 0, what="background render to end")
        assert c.get(f"/v1/videos/{job['id']}").json()["status"] == "failed"
    assert tiiny.counters()["renders_completed"] == 0


def test_it_lets_long_renders_run_past_an_hour_with_generation_timeout_off(tiiny):
    tiiny.disable_quirks("generation_timeout")
    tiiny.load(VIDEO)
    tiiny.set_speed(10000)
    with tiiny.client() as c:
        job = _submit(c, size="1344x768", seconds="7", steps=8)
        time.sleep(3900 / 10000)
        assert c.get(f"/v1/videos/{job['id']}").json()["status"] == "in_progress"


def test_it_fails_videos_over_seven_seconds_after_accepting_them(tiiny):
    tiiny.load(VIDEO)
    with tiiny.client() as c:
        job = _submit(c, seconds="8")
        assert job["status"] == "queued"
        failed = wait_video(c, job["id"], ("failed",))
    assert failed["error"]["message"].startswith("no exported bucket fits a request needing [audio=")
    assert "target_video=" in failed["error"]["message"]


def test_it_refuses_long_videos_at_submit_with_video_seconds_cap_off(tiiny):
    tiiny.disable_quirks("video_seconds_cap")
    tiiny.load(VIDEO)
    with tiiny.client() as c:
        resp = c.post("/v1/videos", json={"model": VIDEO, "prompt": "x", "size": "832x480", "seconds": "8"})
    assert resp.status_code == 400


def test_it_fails_a_size_outside_the_canvases_a_few_seconds_in(tiiny):
    tiiny.load(VIDEO)
    tiiny.set_speed(10)  # 3 device-s = 0.3 s
    with tiiny.client() as c:
        job = _submit(c, size="1024x576")
        assert job["status"] == "queued"
        assert wait_video(c, job["id"], ("in_progress",))["status"] == "in_progress"
        failed = wait_video(c, job["id"], ("failed",))
    assert "1024x576" in failed["error"]["message"]


def test_it_refuses_a_size_outside_the_canvases_with_canvas_check_off(tiiny):
    tiiny.disable_quirks("canvas_check")
    tiiny.load(VIDEO)
    with tiiny.client() as c:
        resp = c.post("/v1/videos", json={"model": VIDEO, "prompt": "x", "size": "1024x576", "seconds": "2"})
    assert resp.status_code == 400


def test_it_stops_the_video_model_slowly_unloads_all_and_fails_the_next_launch_once(tiiny):
    tiiny.load(VIDEO)
    tiiny.load(ZIMAGE)
    tiiny.set_speed(300)  # 90 device-s = 0.3 s
    with tiiny.client() as c:
        started = time.monotonic()
        resp = c.post(f"/api/v1/models/{VIDEO}/stop")
        assert time.monotonic() - started >= 0.28
        assert resp.status_code == 200 and len(resp.json()["removed_container_ids"]) == 2
        assert running_ids(c) == []
        assert c.get("/api/v1/npu/status").json()["devices"] == []  # no NPU readings for a while
        tiiny.set_speed(3000)
        first = c.post(f"/api/v1/models/{VIDEO}/launch", json={"model_id": VIDEO})
        assert first.status_code == 409
        assert first.json() == {
            "code": 409,
            "msg": "cleanup_failed",
            "detail": "physical_stop_failed: runtime cleanup failed and must be retried",
        }
        assert c.post(f"/api/v1/models/{VIDEO}/launch", json={"model_id": VIDEO}).status_code == 200
        wait_running(c, VIDEO)


def test_it_stops_the_video_model_fast_with_slow_stop_cleanup_failed_off(tiiny):
    tiiny.disable_quirks("slow_stop_cleanup_failed")
    tiiny.load(VIDEO)
    tiiny.load(ZIMAGE)
    tiiny.set_speed(30)
    with tiiny.client() as c:
        started = time.monotonic()
        resp = c.post(f"/api/v1/models/{VIDEO}/stop")
        assert time.monotonic() - started < 1.0
        assert len(resp.json()["removed_container_ids"]) == 1 and running_ids(c) == [ZIMAGE]
        assert c.post(f"/api/v1/models/{VIDEO}/launch", json={"model_id": VIDEO}).status_code == 200


def test_it_renders_one_video_at_a_time(tiiny):
    tiiny.load(VIDEO)
    tiiny.set_speed(600)
    with tiiny.client() as c:
        first, second = _submit(c), _submit(c, seed=8)
        wait_video(c, first["id"], ("in_progress",))
        assert c.get(f"/v1/videos/{second['id']}").json()["status"] == "queued"
        wait_video(c, first["id"])
        wait_video(c, second["id"], ("in_progress", "completed"))
    assert tiiny.counters()["peak_concurrent_work"] == 2  # the hub's job is to keep this at 1


def test_it_renders_in_parallel_with_one_at_a_time_off(tiiny):
    tiiny.disable_quirks("one_at_a_time")
    tiiny.load(VIDEO)
    tiiny.set_speed(600)
    with tiiny.client() as c:
        first, second = _submit(c), _submit(c, seed=8)
        wait_video(c, first["id"], ("in_progress",))
        assert wait_video(c, second["id"], ("in_progress", "completed"))


def test_it_forgets_in_flight_renders_on_power_cycle(tiiny):
    tiiny.load(VIDEO)
    tiiny.set_speed(600)
    with tiiny.client() as c:
        job = _submit(c)
        tiiny.power_cycle()
        tiiny.unlock()
        assert c.get(f"/v1/videos/{job['id']}").status_code == 404
        assert running_ids(c) == []
    assert tiiny.counters()["current_work"] == 0
