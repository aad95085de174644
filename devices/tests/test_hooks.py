"""The device layer tells and asks the apps above it through ``devices.hooks``, never by importing them."""

from __future__ import annotations

import datetime as dt

import httpx
import pytest
from django.utils import timezone

from devices import hooks
from devices.clients import TensorSharpClient, TiinyClient
from devices.models import Device
from devices.services import (
    YIELD_WINDOW,
    client_for,
    device_register,
    device_set_state,
    device_tick_yields,
)
from jobs.kinds.table import kinds_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def device():
    return device_register(name="Pocket", kind="tiiny", base_url="http://tiiny.local", api_key="k")


@pytest.fixture
def no_hooks(monkeypatch):
    """Nothing registered: as if neither jobs nor notify were installed."""
    for name in ("_device_locked", "_job_kinds", "_jobs_ask_soon"):
        monkeypatch.setattr(hooks, name, [])


def test_a_locked_device_runs_each_hook_after_commit(device, no_hooks, django_capture_on_commit_callbacks):
    heard: list[tuple[str, int, dt.datetime]] = []
    hooks.register_device_locked(lambda *, device_id, since: heard.append(("a", device_id, since)))
    with django_capture_on_commit_callbacks() as callbacks:
        assert device_set_state(device_id=device.pk, state=Device.State.LOCKED)
    assert not heard  # not before the commit
    for callback in callbacks:
        callback()
    ((name, device_id, since),) = heard
    assert (name, device_id) == ("a", device.pk)
    device.refresh_from_db()
    assert since == device.state_changed_at


def test_a_hook_that_raises_never_raises_from_the_state_change(
    device, no_hooks, django_capture_on_commit_callbacks
):
    heard: list[int] = []

    def broken(*, device_id: int, since: dt.datetime) -> None:
        raise RuntimeError("the mail server is down")

    hooks.register_device_locked(broken)
    hooks.register_device_locked(lambda *, device_id, since: heard.append(device_id))
    with django_capture_on_commit_callbacks(execute=True):
        assert device_set_state(device_id=device.pk, state=Device.State.LOCKED)
    assert heard == [device.pk]  # each hook is its own robust on-commit callback


def test_other_states_and_a_state_kept_run_no_hook(device, no_hooks, django_capture_on_commit_callbacks):
    heard: list[int] = []
    hooks.register_device_locked(lambda *, device_id, since: heard.append(device_id))
    with django_capture_on_commit_callbacks(execute=True):
        device_set_state(device_id=device.pk, state=Device.State.UNREACHABLE)
        device_set_state(device_id=device.pk, state=Device.State.LOCKED)
        assert not device_set_state(device_id=device.pk, state=Device.State.LOCKED)
    assert heard == [device.pk]


def test_a_hook_registered_twice_runs_once(no_hooks):
    def hook(*, device_id: int, since: dt.datetime) -> None: ...

    hooks.register_device_locked(hook)
    hooks.register_device_locked(hook)
    assert hooks.device_locked_hooks() == (hook,)


def test_with_nothing_registered_a_device_runs_no_kinds_and_no_job_asks_it(device, no_hooks):
    assert hooks.job_kinds(device) == []
    assert not hooks.jobs_ask_soon(device, timezone.now(), YIELD_WINDOW)


def test_the_latest_answer_registered_is_the_one_asked(device, no_hooks):
    hooks.register_job_kinds(lambda d: ["video"])
    hooks.register_job_kinds(lambda d: ["speech", "image"])
    hooks.register_jobs_ask_soon(lambda d, now, window: True)
    assert hooks.job_kinds(device) == ["speech", "image"]
    assert hooks.jobs_ask_soon(device, timezone.now(), YIELD_WINDOW)


def test_the_tick_asks_the_jobs_hook_with_its_window(device, no_hooks):
    now = timezone.now()
    Device.objects.filter(pk=device.pk).update(state=Device.State.ONLINE, reading_at=now)
    device.refresh_from_db()
    asked: list[tuple[int, dt.datetime, dt.timedelta]] = []
    hooks.register_jobs_ask_soon(lambda d, at, window: asked.append((d.pk, at, window)) or True)
    assert device_tick_yields(device=device, now=now)
    assert asked == [(device.pk, now, YIELD_WINDOW)]


def test_the_apps_register_their_hooks_at_start_up(device):
    from notify.services import device_locked

    assert device_locked in hooks.device_locked_hooks()
    assert hooks.job_kinds(device) == kinds_for(device)
    assert not hooks.jobs_ask_soon(device, timezone.now(), YIELD_WINDOW)  # no job on it


def test_client_for_hands_the_client_what_it_tells_the_hub(device):
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={}))
    with client_for(device, transport=transport) as job_client:
        assert isinstance(job_client, TiinyClient)
        assert job_client.on_request is not None and job_client.on_loaded is not None
    with client_for(device, note_asked=False, transport=transport) as poller:
        assert poller.on_request is None and poller.on_loaded is not None
    ts = device_register(name="Desk", kind="tensorsharp", base_url="http://ts.local")
    with client_for(ts, transport=transport) as ts_client:
        assert isinstance(ts_client, TensorSharpClient) and ts_client.on_request is not None
