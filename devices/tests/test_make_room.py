"""Making room for a model: unload exactly what the device names, add the fake-fit margin only when needed.

Against the Tiiny emulator over HTTP; the request counters show which unload calls the client made.
"""

from __future__ import annotations

import pytest

from devices.clients.tiiny import TiinyClient

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"  # 45 units
SMALL_CHAT = "Qwen/Qwen3-8B"  # 28 units
FLUX = "black-forest-labs/FLUX.2-klein-4B"  # 50 units
CHAT = "Qwen/Qwen3.6-35B-A3B-turbo"  # 55 units
TTS = "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign"  # 5 units


@pytest.fixture
def c(tiiny) -> TiinyClient:
    return TiinyClient(tiiny.base_url, tiiny.api_key, poll_interval=0.01, load_grace_s=0.0)


def _unload_calls(tiiny) -> dict[str, int]:
    requests = tiiny.counters()["requests"]
    return {
        "unload_all": requests.get("POST /api/v1/models/unload_all", 0),
        "stop": requests.get("POST /api/v1/models/{id}/stop", 0),
    }


def test_it_unloads_only_the_model_the_device_names(tiiny, c):
    """The issue's night: 27 % free, the device asks to unload only the video model. The hub used to add every
    other model to the list (the margin test ignored what the named unloads free) and call ``unload_all``."""
    tiiny.set_quirks(["fake_fit"])
    tiiny.load(VIDEO)
    tiiny.load(SMALL_CHAT)  # 73 used, 27 free; FLUX needs 50
    cand = c.unload_candidate(FLUX)
    assert cand["unload_required"] and cand["unload"] == [VIDEO]
    tiiny.reset_counters()

    result = c.ensure_loaded(FLUX, deadline_s=30)

    assert result.evicted == [VIDEO]
    running = c.running().running
    assert SMALL_CHAT in running and FLUX in running and VIDEO not in running
    assert _unload_calls(tiiny) == {"unload_all": 0, "stop": 1}
    assert result.launch_attempts == 1  # 72 free for 50 needed: the load started, no vanish, no relaunch


def test_it_adds_the_margin_when_the_named_unloads_leave_the_npu_nearly_full(tiiny, c):
    """The device names the small TTS model: freeing it leaves exactly the 45 units the video model needs,
    which on a nearly full NPU is the fake fit (the load would vanish). Then the next largest goes too."""
    tiiny.set_quirks(["fake_fit"])
    tiiny.load(TTS)
    tiiny.load(CHAT)  # 60 used, 40 free; the video model needs 45
    cand = c.unload_candidate(VIDEO)
    assert cand["unload"] == [TTS]
    tiiny.reset_counters()

    result = c.ensure_loaded(VIDEO, deadline_s=30)

    assert sorted(result.evicted) == sorted([TTS, CHAT])
    assert c.running().running == [VIDEO]
    assert tiiny.counters()["launches"] == 1  # no vanished load, no unload-everything-and-relaunch


def test_it_evicts_nothing_when_the_model_fits_with_room_to_spare(tiiny, c):
    tiiny.set_quirks(["fake_fit"])
    tiiny.load(SMALL_CHAT)  # 72 free; the video model needs 45, 27 to spare
    tiiny.reset_counters()
    result = c.ensure_loaded(VIDEO, deadline_s=30)
    assert result.evicted == []
    assert sorted(c.running().running) == sorted([SMALL_CHAT, VIDEO])
    assert _unload_calls(tiiny) == {"unload_all": 0, "stop": 0}


def test_it_notes_when_the_model_became_ready_and_settles_from_then(tiiny, c):
    """``ready_at`` lies between the last read that saw the load pending and the first that saw it running;
    with ``settle`` the wait after it is the window less what already passed since then."""
    import time

    tiiny.set_quirks("none")
    tiiny.set_speed(50)  # the video model loads in 5 device-seconds: 0.1 s here
    c.load_grace_s = 0.3
    started = time.monotonic()
    result = c.ensure_loaded(VIDEO, deadline_s=30, settle=True)
    ended = time.monotonic()
    assert result.ready_at is not None and started < result.ready_at < ended
    assert abs((ended - result.ready_at) - 0.3) < 0.05  # the window, counted from readiness
    assert result.state is not None and VIDEO in result.state.running
