"""The Tiiny client against the emulator over HTTP: loading through each quirk, capabilities, errors.

The first request after a load goes through the job runner's ``TiinyRunner.first_use``, the one production path
that retries it within the readiness window.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import SimpleNamespace
from typing import TypeVar

import pytest

from devices import errors
from devices.capabilities import voices_for_model
from devices.clients import eviction
from devices.clients.tiiny import LoadResult, TiinyClient
from jobs.kinds.runners.tiiny import TiinyRunner

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"
CHAT = "Qwen/Qwen3.6-35B-A3B-turbo"
IMAGE = "Tongyi-MAI/Z-Image-Turbo"
CODER = "Qwen/Qwen3-Coder-Next"
LOOPS = "RoyalCities/Foundation-1"
T = TypeVar("T")


@pytest.fixture
def c(tiiny) -> TiinyClient:
    # The emulator runs thousands of times faster than a device: poll and wait in milliseconds.
    return TiinyClient(tiiny.base_url, tiiny.api_key, poll_interval=0.01, load_grace_s=0.02)


def first_use(c: TiinyClient, loaded: LoadResult, fn: Callable[[], T]) -> T:
    """``fn`` as a job sends its first request after ``loaded``: retried on xh2a / an early 502 until the
    readiness window (``c.load_grace_s`` from ``loaded.ready_at``) and a few windows more have passed."""
    runner = TiinyRunner(SimpleNamespace(pk=0, device=SimpleNamespace(pk=0)), c)
    runner.ready_at = loaded.ready_at
    return runner.first_use(fn)


def test_it_loads_a_model_and_reports_it_already_loaded_next_time(tiiny, c):
    tiiny.set_quirks("none")
    first = c.ensure_loaded(VIDEO, deadline_s=30)
    assert not first.already_loaded
    assert first.launch_attempts == 1
    assert VIDEO in c.running().running
    assert c.ensure_loaded(VIDEO).already_loaded


def test_it_unloads_first_when_the_npu_is_nearly_full_despite_a_fits_answer(tiiny, c):
    tiiny.set_quirks(["fake_fit"])
    tiiny.load(CHAT)  # 55 units used, 45 free; the video model needs 45: "fits", but the load would vanish
    assert not c.unload_candidate(VIDEO)["unload_required"]
    result = c.ensure_loaded(VIDEO, deadline_s=30)
    assert result.evicted == [CHAT]
    assert c.running().running == [VIDEO]


def test_it_recovers_when_a_fake_fit_load_silently_vanishes(tiiny, c, monkeypatch):
    monkeypatch.setattr(eviction, "NPU_MARGIN", 0)  # trust the "fits" answer, to see the rollback path
    tiiny.set_quirks(["fake_fit"])
    tiiny.load(CHAT)
    result = c.ensure_loaded(VIDEO, deadline_s=60)
    assert result.launch_attempts == 2
    assert CHAT in result.evicted
    assert c.running().running == [VIDEO]


def test_it_evicts_what_unload_candidate_names(tiiny, c):
    tiiny.set_quirks("none")
    tiiny.load(CODER)  # 94 units
    result = c.ensure_loaded(IMAGE, deadline_s=30)
    assert result.evicted == [CODER]
    assert c.running().running == [IMAGE]


def test_it_refuses_politely_to_evict_a_model_someone_else_loaded(tiiny, c):
    tiiny.set_quirks("none")
    tiiny.load(CODER)
    with pytest.raises(errors.PoliteRefusal) as info:
        c.ensure_loaded(IMAGE, polite=True, hub_models=[])
    assert info.value.blocking == [CODER]
    assert not info.value.permanent
    assert c.running().running == [CODER]  # nothing was touched
    assert c.ensure_loaded(IMAGE, polite=True, hub_models=[CODER]).evicted == [CODER]


def test_it_retries_xh2a_backend_fail_on_the_first_inference(tiiny, c):
    tiiny.set_quirks(["xh2a_after_load"])
    loaded = c.ensure_loaded(IMAGE, deadline_s=30)
    calls = []

    def generate() -> bytes:
        calls.append(1)
        return c.image_generate(model=IMAGE, prompt="a fox", size="512x512", timeout=30)

    png = first_use(c, loaded, generate)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(calls) == 2


def test_it_retries_an_early_502_after_a_load_without_calling_the_device_locked(tiiny, c):
    tiiny.set_quirks(["bad_gateway_after_load"])
    # 10 device seconds of 502s = 1.25 s real (the load: 3 s): the first request lands inside them even on a busy
    # machine. At speed 100 (0.1 s) and then 25 (0.4 s) a full suite's load let the request through after it.
    tiiny.set_speed(8)
    c.load_grace_s = (
        10 / 8
    )  # the device's window at this speed: retries go on for it and 3 windows more (5 s)
    loaded = c.ensure_loaded(IMAGE, deadline_s=30, settle=False)
    with pytest.raises(errors.Transient):
        c.image_generate(model=IMAGE, prompt="a fox", size="512x512", timeout=30)
    png = first_use(
        c, loaded, lambda: c.image_generate(model=IMAGE, prompt="a fox", size="512x512", timeout=30)
    )
    assert png[:4] == b"\x89PNG"


def test_it_retries_a_409_cleanup_failed_launch(tiiny, c):
    tiiny.set_quirks(["slow_stop_cleanup_failed"])
    c.ensure_loaded(VIDEO, deadline_s=30)
    c.stop(VIDEO)  # slow, unloads everything, and leaves the next launch to fail once with 409
    result = c.ensure_loaded(VIDEO, deadline_s=30)
    assert result.launch_attempts == 2
    assert VIDEO in c.running().running


def test_it_reads_capabilities(tiiny, c):
    tiiny.load(VIDEO)
    caps = c.capabilities()
    assert caps.kind == "tiiny"
    video = caps.video_for(VIDEO)
    assert video.canvases == ["1344x768", "768x1344", "832x480", "480x832"]
    assert video.max_seconds == 7
    assert video.source == "device"
    assert caps.model(VIDEO).loaded
    assert caps.npu_cost(IMAGE) == 32
    assert "vivian" in voices_for_model("Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice").voices
    assert voices_for_model("Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign").mode == "instruct"
    assert "background" not in caps.stages_3d
    assert caps.versions["tiiny_os"]
    assert caps.to_dict() == type(caps).from_dict(caps.to_dict()).to_dict()


def test_it_reads_the_vaults_summary_window_and_model(tiiny, c):
    assert c.memory_schedule()["nightly_start_hour"] == 23
    tiiny.load(CHAT)
    assert c.memory_model()["running_models"] == [CHAT]
    vault = c.capabilities().vault
    assert (vault.summary_start_hour, vault.summary_end_hour, vault.summary_model) == (23, 5, CHAT)
    with tiiny.client() as raw:
        raw.put("/kb/memory/model", json={"model_id": ""})  # automatic summaries off
    assert c.capabilities().vault.summary_model is None


def test_it_reads_3d_stages_from_a_loaded_3d_model(tiiny, c):
    tiiny.load("tencent/Hunyuan3D-2.1")
    stages = c.capabilities().stages_3d
    assert "shape" in stages
    assert "background" not in stages


def test_it_follows_the_state_of_the_device(tiiny, c):
    assert c.reading().npu_units_total == 100
    tiiny.power_cycle()
    with pytest.raises(errors.DeviceLocked):
        c.sys_status()
    with pytest.raises(errors.DeviceLocked):
        c.models()
    tiiny.unlock()
    assert c.sys_status()
    with pytest.raises(errors.AuthFailed):
        TiinyClient(tiiny.base_url, "wrong-key").models()


def test_it_keeps_the_key_out_of_logs_during_a_whole_load(tiiny, c, caplog):
    caplog.set_level(logging.DEBUG)
    loaded = c.ensure_loaded(LOOPS, deadline_s=30)
    first_use(
        c,
        loaded,
        lambda: c.music_wav(model=LOOPS, prompt="drums", seconds=2, steps=8, cfg_scale=7, seed=1, timeout=30),
    )
    with pytest.raises(errors.AuthFailed) as info:
        TiinyClient(tiiny.base_url, "wrong-key").models()
    assert tiiny.api_key not in caplog.text
    assert tiiny.api_key not in repr(info.value)


def test_it_lists_the_devices_video_and_3d_jobs_for_crash_recovery(tiiny, c):
    tiiny.set_quirks("none")
    tiiny.load(VIDEO)
    created = c.video_create(model=VIDEO, prompt="a listed render", size="832x480", seconds=2, steps=4)
    listed = c.video_list()
    assert [row["id"] for row in listed if row.get("prompt") == "a listed render"] == [created["id"]]
    assert c.task3d_list() == []
