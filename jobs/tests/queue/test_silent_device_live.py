"""A render in flight on a device whose link goes silent (packets stop: connections hang, nothing answers) is
collected once the link is back, and rendered once. Real Celery workers against the Tiiny emulator over HTTP,
through a small TCP proxy that can go silent (it keeps accepting connections and forwards nothing)."""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass

import pytest

from devices.emulator.testing import free_port
from hub.testing import wait_for
from jobs.files import store
from jobs.queue.services import job_submit
from jobs.tests.conftest import make_device, wait_job
from jobs.tests.files.media_checks import assert_device_video

pytestmark = pytest.mark.integration

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"


class SilentLink:
    """A TCP proxy to ``target``; while ``silent`` is set nothing is forwarded either way (what a Wi-Fi link
    that stopped carrying packets looks like to the hub: its requests hang until their timeouts)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.silent = threading.Event()
        #: go silent once this many bytes of an answer to a request for ``/content`` (a result) went through
        self.silent_mid_download: int | None = None
        #: go silent once a request starting with these bytes went through (the device gets it, its answer is lost)
        self.silent_after_request: bytes | None = None
        self.port = free_port()
        self._server = socket.create_server(("127.0.0.1", self.port))
        self._server.settimeout(0.2)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            download = {"asked": False, "sent": 0}  # per connection
            for a, b, answers in ((client, upstream, False), (upstream, client, True)):
                t = threading.Thread(target=self._pump, args=(a, b, answers, download), daemon=True)
                t.start()

    def _pump(self, src: socket.socket, dst: socket.socket, answers: bool, download: dict) -> None:
        src.settimeout(0.2)
        try:
            while not self._stop.is_set():
                try:
                    data = src.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                if not answers and b"/content " in data:
                    download["asked"] = True
                if not answers and self.silent_after_request and data.startswith(self.silent_after_request):
                    self.silent_after_request = None
                    download["whole_request"] = True  # the rest of this request (its body) still goes through
                    self.silent.set()
                if not answers and download.get("whole_request"):
                    dst.sendall(data)
                    continue
                if answers and download["asked"] and self.silent_mid_download is not None:
                    room = self.silent_mid_download - download["sent"]
                    if room <= len(data):
                        data = data[: max(room, 0)]
                        self.silent.set()
                        self.silent_mid_download = None
                        dst.sendall(data)  # the part before the silence, then nothing
                        continue
                    download["sent"] += len(data)
                if not self.silent.is_set():
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self._stop.set()
        self._server.close()


@dataclass
class Via:
    base_url: str
    api_key: str


@pytest.fixture
def link(tiiny):
    host, port = tiiny.base_url.removeprefix("http://").split(":")
    proxy = SilentLink((host, int(port)))
    yield proxy
    proxy.close()


def test_a_render_on_a_device_gone_silent_is_collected_once_the_link_is_back(engine, tiiny, link, member):
    device = make_device(Via(link.base_url, tiiny.api_key), name="Behind Wi-Fi")
    job = job_submit(
        owner=member,
        device=device,
        kind="video",
        model_id=VIDEO,
        params={"prompt": "a red fox in the snow", "size": "832x480", "seconds": 2, "steps": 4},
    )
    wait_for(
        lambda: job.events.filter(message__startswith="The device accepted it").exists(),
        timeout=60,
        what="the device to accept the render",
    )
    link.silent.set()  # while it renders
    try:
        wait_for(
            lambda: job.events.filter(message__startswith="Waiting for the device").exists(),
            timeout=90,
            what="a poll to find the device silent",
        )
    except TimeoutError:
        job.refresh_from_db()
        story = "\n".join(f"  {e.seq} {e.state}: {e.message}" for e in job.events.order_by("seq"))
        raise AssertionError(
            f"job {job.pk} is {job.state} ({job.phase}):\n{story}\n{engine.logs()}"
        ) from None
    job.refresh_from_db()
    assert job.state in ("submitted", "running")  # its claim stands: not re-queued, not failed
    link.silent.clear()

    wait_job(job, timeout=120, engine=engine)
    assert job.artifacts.filter(name="video.mp4").exists()
    assert job.events.filter(message="The device answers again.").exists()
    assert tiiny.counters()["renders_submitted"] == 1  # rendered once


def test_a_download_that_goes_silent_mid_body_is_fetched_again_and_the_video_rendered_once(
    engine, tiiny, link, member
):
    """The link stops carrying packets part-way through the result's body: the download waits out its timeout,
    the job stays collecting (never shown done, nothing short stored), and once the link is back it downloads the
    whole file from the device, which rendered it once."""
    device = make_device(Via(link.base_url, tiiny.api_key), name="Behind Wi-Fi")
    link.silent_mid_download = 20_000
    job = job_submit(
        owner=member,
        device=device,
        kind="video",
        model_id=VIDEO,
        params={"prompt": "a red fox in the snow", "size": "832x480", "seconds": 2, "steps": 4},
    )
    wait_for(link.silent.is_set, timeout=90, what="the link to go silent mid-download")
    job.refresh_from_db()
    assert job.state == "collecting" and not job.artifacts.exists()
    wait_for(
        lambda: job.events.filter(message__startswith="Downloading the result broke").exists(),
        timeout=120,
        what="the download to give up on the silent link",
    )
    job.refresh_from_db()
    assert job.state == "collecting" and not job.artifacts.exists()
    link.silent.clear()

    wait_job(job, timeout=120, engine=engine)
    with tiiny.client() as http:
        whole = http.get(f"/v1/videos/{job.remote_id}/content").content
    video = job.artifacts.get(name="video.mp4")
    stored = store.read_bytes(video.file.name)
    assert len(whole) > 20_000 and video.bytes == len(stored)
    assert_device_video(whole, stored)  # the device's whole render, its story written in (jobs.files.story)
    assert tiiny.counters()["renders_submitted"] == 1  # rendered once


def test_a_create_call_whose_answer_is_lost_waits_for_the_device_then_adopts_its_render_once(
    engine, tiiny, link, member
):
    """The device gets the create call, and the link goes silent before its answer comes back: the job never
    stays "Sending"; it waits for the device, saying so, and once the link is back the hub finds the render the
    device started and collects it, never sending it a second time."""
    tiiny.disable_quirks("xh2a_after_load", "bad_gateway_after_load")  # its first create is the one it keeps
    device = make_device(Via(link.base_url, tiiny.api_key), name="Behind Wi-Fi")
    link.silent_after_request = b"POST /v1/videos "
    job = job_submit(
        owner=member,
        device=device,
        kind="video",
        model_id=VIDEO,
        params={"prompt": "a red fox on the ice", "size": "832x480", "seconds": 2, "steps": 4},
    )
    wait_for(link.silent.is_set, timeout=60, what="the create call to go out")
    wait_for(
        lambda: job.events.filter(message__startswith="Waiting for the device").exists(),
        timeout=120,
        what="the job to wait for the silent device",
    )
    job.refresh_from_db()
    assert job.state == "submitted" and not job.remote_id
    assert job.phase.startswith("Waiting for the device")  # not "Sending"
    assert tiiny.counters()["renders_submitted"] == 1  # the device got it
    link.silent.clear()

    wait_job(job, timeout=120, engine=engine)
    assert job.artifacts.filter(name="video.mp4").exists()
    assert job.events.filter(message__startswith="Found the render the device had already started").exists()
    assert tiiny.counters()["renders_submitted"] == 1  # rendered once
