"""A result download finishes whole or not at all (``HttpDevice.fetch_file``), over ``httpx.MockTransport``:
a body cut mid-way goes on from where it stopped where the device answers ranges (206 + Content-Range) and
starts again where it doesn't; a file shorter than declared, or not whole for its format, never becomes the
result; the attempts are bounded."""

from __future__ import annotations

import re

import httpx
import pytest

from devices import errors
from devices.clients.tensorsharp import TensorSharpClient
from devices.clients.tiiny import TiinyClient
from devices.tests.media_samples import SAMPLES

VIDEO = SAMPLES["mp4"]


class CutStream(httpx.SyncByteStream):
    """A body that stops after ``cut`` bytes as a dropped Wi-Fi link does (the connection breaks)."""

    def __init__(self, data: bytes, cut: int | None) -> None:
        self.data, self.cut = data, cut

    def __iter__(self):
        if self.cut is None:
            yield self.data
            return
        yield self.data[: self.cut]
        raise httpx.ReadError("connection reset by peer")


class Device:
    """Serves ``data`` at any path; cuts the first ``cuts`` answers after ``cut_at`` bytes; answers ``Range``
    with a 206 when ``ranges`` (else the whole file, 200)."""

    def __init__(self, data: bytes, *, cuts: int = 1, cut_at: int = 100, ranges: bool = True) -> None:
        self.data, self.cuts, self.cut_at, self.ranges = data, cuts, cut_at, ranges
        self.asked: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        wanted = request.headers.get("range")
        self.asked.append(wanted)
        start, status, headers = 0, 200, {}
        if wanted and self.ranges:
            start = int(re.match(r"bytes=(\d+)-", wanted).group(1))
            status = 206
            headers["Content-Range"] = f"bytes {start}-{len(self.data) - 1}/{len(self.data)}"
        body = self.data[start:]
        headers["Content-Length"] = str(len(body))
        cut = None
        if self.cuts > 0:
            self.cuts -= 1
            cut = self.cut_at
        return httpx.Response(status, headers=headers, stream=CutStream(body, cut))


def pocket_client(handler) -> TiinyClient:
    client = TiinyClient("http://pocket.test", "key", transport=httpx.MockTransport(handler))
    client.sleep = lambda s: None
    return client


def test_a_cut_download_goes_on_from_where_it_stopped(tmp_path):
    device = Device(VIDEO, cuts=1, cut_at=100)
    dest = tmp_path / "video.mp4.download"
    with pocket_client(device) as client:
        assert client.video_download("v1", dest) == len(VIDEO)
    assert dest.read_bytes() == VIDEO
    assert device.asked == [None, "bytes=100-"]
    assert not (tmp_path / "video.mp4.download.part").exists()


def test_a_device_that_ignores_ranges_sends_it_again_from_the_start(tmp_path):
    device = Device(VIDEO, cuts=2, cut_at=150, ranges=False)
    dest = tmp_path / "video.mp4.download"
    with pocket_client(device) as client:
        client.video_download("v1", dest)
    assert dest.read_bytes() == VIDEO  # not the first 150 bytes twice
    assert device.asked == [None, "bytes=150-", "bytes=150-"]


def test_the_attempts_are_bounded_and_nothing_half_is_left(tmp_path):
    device = Device(VIDEO, cuts=99, cut_at=10, ranges=False)
    waits: list[float] = []
    dest = tmp_path / "video.mp4.download"
    with pocket_client(device) as client:
        client.sleep = waits.append
        with pytest.raises(errors.Transient):
            client.video_download("v1", dest)
    assert len(device.asked) == client.download_attempts
    assert waits == sorted(waits) and len(waits) == client.download_attempts - 1  # a growing wait
    assert list(tmp_path.iterdir()) == []


def test_a_body_shorter_than_declared_is_refused(tmp_path):
    def short(request):  # the link closes cleanly after 100 bytes, but 100 is not what was declared
        return httpx.Response(
            200, headers={"Content-Length": str(len(VIDEO))}, stream=CutStream(VIDEO[:100], None)
        )

    dest = tmp_path / "video.mp4.download"
    with pocket_client(short) as client, pytest.raises(errors.Transient) as refused:
        client.video_download("v1", dest)
    assert "shorter" in refused.value.human
    assert f"100 of {len(VIDEO)}" in refused.value.detail
    assert list(tmp_path.iterdir()) == []


def test_a_file_not_whole_for_its_format_is_refused_even_at_its_declared_length(tmp_path):
    half = VIDEO[: len(VIDEO) // 2]  # the device itself serves a cut file, and says it is that long
    dest = tmp_path / "video.mp4.download"
    with pocket_client(lambda request: httpx.Response(200, content=half)) as client:
        with pytest.raises(errors.Transient) as refused:
            client.video_download("v1", dest)
    assert "not whole" in refused.value.human and "MP4" in refused.value.detail
    assert list(tmp_path.iterdir()) == []


def test_a_range_answer_for_other_bytes_begins_again(tmp_path):
    calls: list[str | None] = []

    def handler(request):
        calls.append(request.headers.get("range"))
        if len(calls) == 1:
            return httpx.Response(
                200, headers={"Content-Length": str(len(VIDEO))}, stream=CutStream(VIDEO, 100)
            )
        if len(calls) == 2:  # a 206 for bytes it was not asked for
            return httpx.Response(
                206, headers={"Content-Range": f"bytes 0-9/{len(VIDEO)}"}, content=VIDEO[:10]
            )
        return httpx.Response(200, content=VIDEO)

    dest = tmp_path / "video.mp4.download"
    with pocket_client(handler) as client:
        client.video_download("v1", dest)
    assert dest.read_bytes() == VIDEO
    assert calls == [None, "bytes=100-", None]


def test_a_refusal_is_not_asked_again(tmp_path):
    calls = []

    def gone(request):
        calls.append(request)
        return httpx.Response(404, json={"error": {"message": "no such video", "code": "not_found"}})

    with pocket_client(gone) as client, pytest.raises(errors.NotFound):
        client.video_download("v1", tmp_path / "video.mp4.download")
    assert len(calls) == 1


def test_tensorsharp_downloads_are_resumed_too(tmp_path):
    device = Device(SAMPLES["wav"], cuts=1, cut_at=44)
    dest = tmp_path / "audio.wav.download"
    with TensorSharpClient("http://ts.test", transport=httpx.MockTransport(device)) as client:
        client.sleep = lambda s: None
        assert client.download("/uploads/a.wav", dest) == len(SAMPLES["wav"])
    assert dest.read_bytes() == SAMPLES["wav"]
    assert device.asked == [None, "bytes=44-"]


def test_a_device_gone_silent_is_left_to_the_jobs_next_collect_step(tmp_path):
    calls = []

    def silent(request):
        calls.append(request)
        raise httpx.ReadTimeout("no answer", request=request)

    with pocket_client(silent) as client, pytest.raises(errors.DeviceTimeout):
        client.video_download("v1", tmp_path / "video.mp4.download")
    assert len(calls) == 1  # one timeout waited out, not four: the worker is free for other devices
    assert list(tmp_path.iterdir()) == []
