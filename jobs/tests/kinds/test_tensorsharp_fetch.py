"""A TensorSharp render's result stays on the host as a file: when its download keeps breaking, the runner asks
for the file again (for ``FETCH_PATIENCE_S``), never the render; a cancel stops the waiting. Over
``httpx.MockTransport``."""

from __future__ import annotations

import httpx
import pytest

from devices import errors
from devices.clients.tensorsharp import TensorSharpClient
from devices.models import Device
from devices.tests.media_samples import SAMPLES
from jobs.kinds.runners import tensorsharp as runners
from jobs.kinds.runners.base import Stopped
from jobs.models import Job

VIDEO = SAMPLES["mp4"]


def _runner(handler, waits: list[float]) -> runners.TensorSharpVideoRunner:
    client = TensorSharpClient("http://ts.test", transport=httpx.MockTransport(handler))
    client.sleep = lambda s: None
    job = Job(pk=7, kind="video", model_id="m", device=Device(pk=3, name="ts-pc", kind="tensorsharp"))
    runner = runners.TensorSharpVideoRunner(job, client)
    runner.sleep = waits.append
    return runner


def _silent_then_whole(silent: int):
    calls = []

    def handler(request):
        calls.append(request)
        if len(calls) <= silent:
            raise httpx.ConnectTimeout("no answer", request=request)
        return httpx.Response(200, content=VIDEO)

    return handler, calls


def test_a_result_whose_download_breaks_is_asked_for_again_not_rendered_again(tmp_path):
    handler, calls = _silent_then_whole(3)
    waits: list[float] = []
    dest = tmp_path / "video.mp4.download"
    _runner(handler, waits)._fetch("/uploads/v.mp4", dest, lambda pct, phase: False)
    assert dest.read_bytes() == VIDEO
    assert len(calls) == 4 and waits == [5.0, 10.0, 20.0]
    assert all(c.url.path == "/uploads/v.mp4" for c in calls)  # the file each time, never a render


def test_it_gives_up_after_its_patience(tmp_path, monkeypatch):
    monkeypatch.setattr(runners, "FETCH_PATIENCE_S", 0.0)
    handler, calls = _silent_then_whole(99)
    with pytest.raises(errors.DeviceUnreachable):
        _runner(handler, [])._fetch("/uploads/v.mp4", tmp_path / "video.mp4.download", lambda p, s: False)
    assert len(calls) == 1


def test_a_cancel_stops_the_waiting(tmp_path):
    handler, calls = _silent_then_whole(99)
    with pytest.raises(Stopped):
        _runner(handler, [])._fetch("/uploads/v.mp4", tmp_path / "video.mp4.download", lambda p, s: True)
    assert len(calls) == 1


def test_a_refusal_is_not_asked_again(tmp_path):
    calls = []

    def gone(request):
        calls.append(request)
        return httpx.Response(404, text="Not Found")

    with pytest.raises(errors.DeviceError):
        _runner(gone, [])._fetch("/uploads/v.mp4", tmp_path / "video.mp4.download", lambda p, s: False)
    assert len(calls) == 1
