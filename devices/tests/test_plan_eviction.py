"""What to unload before a load (``plan_eviction``): pure, every rule on plain data, no device.

``test_make_room.py`` checks the same rules against the emulator through ``TiinyClient.ensure_loaded``.
"""

from __future__ import annotations

import pytest

from devices.capabilities import NPU_MARGIN
from devices.clients.eviction import (
    DeviceHolds,
    EvictionPlan,
    FitAnswer,
    WantedModel,
    needs_fit_answer,
    plan_eviction,
)

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"  # 45 units
SMALL_CHAT = "Qwen/Qwen3-8B"  # 28 units
FLUX = "black-forest-labs/FLUX.2-klein-4B"  # 50 units
CHAT = "Qwen/Qwen3.6-35B-A3B-turbo"  # 55 units
TTS = "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign"  # 5 units
COSTS = {VIDEO: 45, SMALL_CHAT: 28, FLUX: 50, CHAT: 55, TTS: 5}


def holds(*running: str, pending: tuple[str, ...] = (), hub: tuple[str, ...] = (), fit=None) -> DeviceHolds:
    return DeviceHolds(running=running, pending=pending, hub_loaded=frozenset(hub), fit=fit)


def fits(needed: int, available: int) -> FitAnswer:
    return FitAnswer(unload_required=False, npu_needed=needed, npu_available=available)


def unload(*named: str, needed: int, available: int) -> FitAnswer:
    return FitAnswer(unload_required=True, named=named, npu_needed=needed, npu_available=available)


# -- nothing to unload -----------------------------------------------------------------------------------------
def test_an_empty_device_needs_no_fit_answer_and_unloads_nothing():
    wanted = WantedModel(VIDEO)
    assert not needs_fit_answer(holds(), wanted)
    assert plan_eviction(holds(), wanted, COSTS) == EvictionPlan()


def test_the_wanted_model_alone_on_the_device_is_nothing_to_unload():
    for device in (holds(VIDEO), holds(pending=(VIDEO,))):
        assert not needs_fit_answer(device, WantedModel(VIDEO))
        assert plan_eviction(device, WantedModel(VIDEO, exclusive=True), COSTS) == EvictionPlan()


def test_it_unloads_nothing_when_the_model_fits_with_room_to_spare():
    device = holds(SMALL_CHAT, fit=fits(needed=45, available=72))
    assert needs_fit_answer(device, WantedModel(VIDEO))
    assert plan_eviction(device, WantedModel(VIDEO), COSTS) == EvictionPlan()


def test_it_unloads_nothing_without_a_fit_answer_unless_exclusive():
    assert plan_eviction(holds(CHAT), WantedModel(VIDEO), COSTS) == EvictionPlan()


def test_the_margin_holds_exactly_at_npu_margin_to_spare():
    device = holds(SMALL_CHAT, fit=fits(needed=45, available=45 + NPU_MARGIN))
    assert plan_eviction(device, WantedModel(VIDEO), COSTS).evict == ()


# -- the device names whom to unload ---------------------------------------------------------------------------
def test_it_unloads_only_the_one_model_the_device_names():
    """27 free, FLUX needs 50, the device names the video model: 72 free after it, no margin needed."""
    device = holds(VIDEO, SMALL_CHAT, fit=unload(VIDEO, needed=50, available=27))
    plan = plan_eviction(device, WantedModel(FLUX), COSTS)
    assert plan == EvictionPlan(evict=(VIDEO,), unload_all=False)


def test_it_unloads_several_named_models_once_each_and_never_the_wanted_one():
    device = holds(VIDEO, SMALL_CHAT, TTS, fit=unload(VIDEO, FLUX, TTS, needed=40, available=0))
    plan = plan_eviction(device, WantedModel(FLUX), COSTS)
    assert plan == EvictionPlan(evict=(VIDEO, TTS), unload_all=False)  # 50 free for 40: the margin holds


def test_an_unload_without_names_unloads_every_other_model_at_once():
    device = holds(CHAT, pending=(TTS,), fit=unload(needed=45, available=40))
    assert plan_eviction(device, WantedModel(VIDEO), COSTS) == EvictionPlan(
        evict=(CHAT, TTS), unload_all=True
    )


def test_a_named_model_the_running_list_does_not_show_is_still_unloaded():
    device = holds(SMALL_CHAT, fit=unload(FLUX, needed=45, available=100))
    plan = plan_eviction(device, WantedModel(VIDEO), COSTS)
    assert plan == EvictionPlan(evict=(FLUX,), unload_all=False)


# -- the fake-fit margin ---------------------------------------------------------------------------------------
def test_the_margin_adds_the_largest_other_model_when_the_named_ones_leave_the_npu_nearly_full():
    """Freeing the TTS model leaves exactly the 45 units the video model needs: the fake fit."""
    device = holds(TTS, CHAT, fit=unload(TTS, needed=45, available=40))
    assert plan_eviction(device, WantedModel(VIDEO), COSTS) == EvictionPlan(
        evict=(TTS, CHAT), unload_all=True
    )


def test_a_fits_answer_on_a_nearly_full_npu_still_unloads_for_the_margin():
    device = holds(CHAT, fit=fits(needed=45, available=45))
    assert plan_eviction(device, WantedModel(VIDEO), COSTS) == EvictionPlan(evict=(CHAT,), unload_all=True)


def test_the_margin_unloads_largest_first_and_stops_as_soon_as_it_holds():
    device = holds(TTS, SMALL_CHAT, CHAT, fit=fits(needed=45, available=12))
    plan = plan_eviction(device, WantedModel(VIDEO), COSTS)
    assert plan == EvictionPlan(evict=(CHAT,), unload_all=False)  # 67 free: 22 to spare
    device = holds(TTS, SMALL_CHAT, fit=fits(needed=45, available=22))
    assert plan_eviction(device, WantedModel(VIDEO), COSTS).evict == (SMALL_CHAT,)  # 50 free: 5 to spare
    device = holds(TTS, SMALL_CHAT, fit=fits(needed=45, available=20))
    assert plan_eviction(device, WantedModel(VIDEO), COSTS).evict == (SMALL_CHAT, TTS)  # 48 free: 3, too few


def test_a_model_of_unknown_cost_frees_nothing_and_goes_last():
    device = holds("someone/unknown", SMALL_CHAT, fit=fits(needed=45, available=10))
    plan = plan_eviction(device, WantedModel(VIDEO), COSTS)
    assert plan == EvictionPlan(evict=(SMALL_CHAT, "someone/unknown"), unload_all=True)


def test_when_even_an_empty_npu_leaves_no_margin_everything_goes_and_no_more():
    device = holds(TTS, CHAT, fit=fits(needed=98, available=40))
    assert plan_eviction(device, WantedModel(VIDEO), COSTS) == EvictionPlan(
        evict=(CHAT, TTS), unload_all=True
    )


# -- exclusive use and politeness ------------------------------------------------------------------------------
def test_exclusive_use_unloads_every_other_model_without_asking_whether_it_fits():
    device = holds(CHAT, TTS, pending=(SMALL_CHAT,))
    wanted = WantedModel(VIDEO, exclusive=True)
    assert not needs_fit_answer(device, wanted)
    assert plan_eviction(device, wanted, {}) == EvictionPlan(evict=(CHAT, TTS, SMALL_CHAT), unload_all=True)


def test_a_polite_load_names_someone_elses_models_it_would_unload_and_plans_to_touch_nothing_else():
    device = holds(CHAT, TTS, hub=(TTS,), fit=unload(needed=45, available=40))
    plan = plan_eviction(device, WantedModel(VIDEO, polite=True), COSTS)
    assert plan.blocking == (CHAT,)


def test_a_polite_load_unloads_the_hubs_own_models_freely():
    device = holds(CHAT, TTS, hub=(CHAT, TTS), fit=unload(needed=45, available=40))
    plan = plan_eviction(device, WantedModel(VIDEO, polite=True), COSTS)
    assert plan == EvictionPlan(evict=(CHAT, TTS), unload_all=True, blocking=())


def test_a_polite_load_that_unloads_nothing_is_never_blocked():
    device = holds(SMALL_CHAT, fit=fits(needed=45, available=72))
    assert plan_eviction(device, WantedModel(VIDEO, polite=True), COSTS).blocking == ()


def test_a_polite_exclusive_load_is_blocked_by_any_foreign_model():
    device = holds(CHAT, TTS, hub=(CHAT,))
    assert plan_eviction(device, WantedModel(VIDEO, polite=True, exclusive=True), {}).blocking == (TTS,)


@pytest.mark.parametrize(
    ("evicted", "unload_all"), [((CHAT,), False), ((CHAT, TTS), True), ((CHAT, TTS, FLUX), True)]
)
def test_one_unload_all_replaces_a_stop_per_model_only_when_every_other_model_goes(evicted, unload_all):
    device = holds(CHAT, TTS, fit=unload(*evicted, needed=0, available=100))
    assert plan_eviction(device, WantedModel(VIDEO), COSTS).unload_all is unload_all
