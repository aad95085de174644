"""The hub's list of the models it loaded (``Device.hub_loaded_models``) stays true to the device.

Polite mode evicts only models the hub loaded. When the device unloads them behind the hub's back (a power cycle,
the slow video-model stop that unloads everything), a model someone else loads afterwards must not be taken for
the hub's own. Every read of the device's running list reconciles the hub's list with it.
Against the Tiiny emulator over HTTP (its control API power-cycles it and switches quirks).
"""

from __future__ import annotations

import pytest

from devices import errors
from devices.clients.tiiny import TiinyClient
from devices.models import Device
from devices.selectors import device_loaded_models
from devices.services import device_note_running, device_refresh

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"  # 45 units
IMAGE = "Tongyi-MAI/Z-Image-Turbo"  # 32 units
CHAT = "Qwen/Qwen3.6-35B-A3B-turbo"  # 55 units
CODER = "Qwen/Qwen3-Coder-Next"  # 94 units


@pytest.fixture
def c(tiiny) -> TiinyClient:
    return TiinyClient(tiiny.base_url, tiiny.api_key, poll_interval=0.01, load_grace_s=0.0)


def _hub_loads(c: TiinyClient, device: Device, model: str) -> None:
    """What the job runner does after a load: note the model as the hub's, from the running list it read."""
    result = c.ensure_loaded(model, deadline_s=30)
    device_note_running(device_id=device.pk, state=result.state, loaded=model, unloaded=result.evicted)


def _mine(device: Device) -> list[str]:
    device.refresh_from_db()
    return device.hub_loaded_models


def test_it_forgets_its_models_after_a_power_cycle_and_leaves_a_foreign_load_alone(tiiny, c, pocket):
    tiiny.set_quirks(["locked_after_power_cycle"])
    _hub_loads(c, pocket, VIDEO)
    assert _mine(pocket) == [VIDEO]
    device_refresh(device_id=pocket.pk)  # a full reading while all is well keeps it
    assert _mine(pocket) == [VIDEO]

    tiiny.power_cycle()  # everything unloads; locked until unlocked
    assert device_refresh(device_id=pocket.pk) == "locked"
    assert _mine(pocket) == []  # a lock comes with a restart: what the hub loaded is gone
    tiiny.unlock()
    assert device_refresh(device_id=pocket.pk) == "online"
    assert _mine(pocket) == []

    tiiny.load(VIDEO)  # someone else loads the same model afterwards
    device_refresh(device_id=pocket.pk)
    assert _mine(pocket) == []
    # CHAT needs 55 of the 55 free: the fake-fit margin asks to unload the video model, which is not the hub's.
    with pytest.raises(errors.PoliteRefusal) as refused:
        c.ensure_loaded(CHAT, polite=True, hub_models=_mine(pocket), deadline_s=30)
    assert refused.value.blocking == [VIDEO]
    assert VIDEO in c.running().running


def test_it_forgets_what_a_slow_video_stop_unloaded(tiiny, c, pocket):
    """Cancelling a video stops the video model; on the device that stop is slow and unloads every model."""
    from jobs.kinds.runners.tiiny import TiinyVideoRunner
    from jobs.models import Job

    tiiny.set_quirks(["slow_stop_cleanup_failed"])
    _hub_loads(c, pocket, IMAGE)
    _hub_loads(c, pocket, VIDEO)
    assert sorted(_mine(pocket)) == sorted([IMAGE, VIDEO])

    job = Job(device=pocket, kind="video", model_id=VIDEO, remote_id="")
    TiinyVideoRunner(job, c).cancel()  # stops the video model: the image model goes with it

    assert c.running().running == []
    assert _mine(pocket) == []
    tiiny.load(IMAGE)  # someone else's, now
    with pytest.raises(errors.PoliteRefusal) as refused:
        c.ensure_loaded(CODER, polite=True, hub_models=_mine(pocket), deadline_s=30)
    assert refused.value.blocking == [IMAGE]


def test_it_drops_a_model_a_reading_no_longer_shows(tiiny, c, pocket):
    """Unloaded by someone else (or by the device) without a power cycle: the next full reading reconciles."""
    tiiny.set_quirks("none")
    _hub_loads(c, pocket, IMAGE)
    _hub_loads(c, pocket, VIDEO)
    c.stop(IMAGE)  # not through the hub's own bookkeeping
    Device.objects.filter(pk=pocket.pk).update(state=Device.State.UNKNOWN)  # the next reading is a full one
    device_refresh(device_id=pocket.pk)
    assert _mine(pocket) == [VIDEO]
    pocket.refresh_from_db()
    assert [m["model_id"] for m in pocket.loaded_models] == [VIDEO]


def test_a_status_only_tick_keeps_the_last_full_reading(tiiny, c, pocket):
    """Between full readings the poller reads ``sys/status`` only: one device request per tick."""
    tiiny.set_quirks("none")
    _hub_loads(c, pocket, IMAGE)
    device_refresh(device_id=pocket.pk)  # full (first reading)
    tiiny.reset_counters()
    device_refresh(device_id=pocket.pk)
    requests = tiiny.counters()["requests"]
    assert requests == {"GET /api/v1/sys/status": 1}
    pocket.refresh_from_db()
    assert [m["model_id"] for m in pocket.loaded_models] == [IMAGE]
    assert pocket.npu_units_used == 32


def _prepare(pocket: Device, c: TiinyClient, model: str, *, polite: bool) -> list[str]:
    """The job runner's own load (``TiinyRunner.prepare``), which passes the hub's list and noted instances."""
    from jobs.kinds.runners.tiiny import TiinyRunner
    from jobs.models import Job

    pocket.refresh_from_db()
    job = Job(device=pocket, kind="chat", model_id=model, remote_id="")
    return TiinyRunner(job, c).prepare(polite=polite)


def test_a_restart_the_hub_never_saw_ends_its_claim_on_a_model_loaded_again(tiiny, c, pocket):
    """Power-cycled and unlocked between two looks of the hub, then someone loads the same model: it runs as
    another instance (another launch time), so it is theirs. The next read of the running list drops it from the
    hub's list (the device page's "[hub]" tag follows), and a polite load spares it even before that read."""

    tiiny.set_quirks(["locked_after_power_cycle"])
    _prepare(pocket, c, VIDEO, polite=False)
    assert _mine(pocket) == [VIDEO]
    pocket.refresh_from_db()
    assert set(pocket.hub_loaded_instances[VIDEO]) >= {"created_at"}

    tiiny.power_cycle()
    tiiny.unlock()
    tiiny.load(VIDEO)  # someone else, in the vendor app
    assert _mine(pocket) == [VIDEO]  # the hub has not looked yet

    # A polite load that needs the video model's units refuses rather than unload someone else's model.
    with pytest.raises(errors.PoliteRefusal) as refused:
        _prepare(pocket, c, CHAT, polite=True)
    assert refused.value.blocking == [VIDEO]
    assert VIDEO in c.running().running

    device_note_running(device_id=pocket.pk, state=c.running())  # any read of the running list
    assert _mine(pocket) == []
    pocket.refresh_from_db()
    shown = {m.model_id: m.by_hub for m in device_loaded_models(pocket)}  # the device page's "[hub]" tag
    assert shown == {VIDEO: False}


def test_the_same_instance_stays_the_hubs(tiiny, c, pocket):
    """No restart: reading the running list again and again keeps the hub's model its own, and a polite load
    may evict it."""
    tiiny.set_quirks("none")
    _prepare(pocket, c, VIDEO, polite=False)
    for _ in range(2):
        device_note_running(device_id=pocket.pk, state=c.running())
    assert _mine(pocket) == [VIDEO]
    assert _prepare(pocket, c, CODER, polite=True) == [VIDEO]
