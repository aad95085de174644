"""One device's silence stalls no other (issue 36, item 1): two emulated Tiinys, one behind a link that goes silent
(``SilentLink``: connections accepted, nothing forwarded) while it renders a video, the other on a clean link, and
one worker process with one slot serving both devices' queues (the small profile, hub.profile). The clean device's
short image jobs all finish while the first device is still silent; the silent device's render is collected once
the link is back, rendered once."""

from __future__ import annotations

import time

import pytest

from devices.emulator.testing import run_tiiny
from devices.models import Device
from hub.testing import wait_for
from jobs.queue.services import job_submit
from jobs.tests.conftest import make_device, wait_job
from jobs.tests.queue.test_silent_device_live import VIDEO, SilentLink, Via

pytestmark = pytest.mark.integration

#: The silent device's clock: its 2 s video takes ~4 s, so it is rendering when the link goes silent.
SPEED = 100
IMAGE = "Tongyi-MAI/Z-Image-Turbo"
#: A generous cap on the silence (a failure, not a timing): the clean device's jobs finish long before.
SILENCE_CAP_S = 240


@pytest.fixture(scope="module")
def two_tiinys():
    with (
        run_tiiny(speed=SPEED, api_key="far-key", quirks="none") as far,
        run_tiiny(speed=3000, api_key="near-key", quirks="none") as near,
    ):
        yield far, near


@pytest.fixture
def small_engine(engine):
    """The engine with one worker of one slot for every device's queue, as the small profile runs it."""
    engine.stop_all()
    engine.start_worker("small", concurrency=1)
    yield engine
    engine.stop_all()  # the next test's engine starts its own e1


def test_a_silent_device_holds_no_other_devices_short_jobs_on_the_small_profile(
    small_engine, two_tiinys, member
):
    far, near = two_tiinys
    far.reset(speed=SPEED, quirks="none")
    near.reset(speed=3000, quirks="none")
    host, port = far.base_url.removeprefix("http://").split(":")
    link = SilentLink((host, int(port)))
    try:
        silent = make_device(Via(link.base_url, far.api_key), name="Behind Wi-Fi")
        clean = make_device(near, name="On the cable")
        video = job_submit(
            owner=member,
            device=silent,
            kind="video",
            model_id=VIDEO,
            params={"prompt": "a red fox in the snow", "size": "832x480", "seconds": 2, "steps": 4},
        )
        wait_for(
            lambda: video.events.filter(message__startswith="The device accepted it").exists(),
            timeout=60,
            what="the device to accept the render",
        )
        link.silent.set()  # while it renders
        went_silent = time.monotonic()
        images = [
            job_submit(
                owner=member,
                device=clean,
                kind="image",
                model_id=IMAGE,
                params={"prompt": f"a lighthouse {i}", "size": "512x512", "n": 1, "steps": 4},
            )
            for i in range(6)
        ]
        for job in images:
            wait_job(job, timeout=SILENCE_CAP_S, engine=small_engine)
        took = time.monotonic() - went_silent
        print(f"six images on the clean device while the other was silent: {took:.1f} s")
        assert link.silent.is_set()  # all of them while the other device was still silent
        wait_for(  # its pages tell the silence apart (the poller reads the link gate's mark; pages read the row)
            lambda: Device.objects.filter(
                pk=silent.pk, state=Device.State.UNREACHABLE, state_message__startswith="No answer since"
            ).exists(),
            timeout=60,
            what="the silent device to show 'No answer since'",
        )
        assert Device.objects.get(pk=clean.pk).state == Device.State.ONLINE
        video.refresh_from_db()
        assert video.state in ("submitted", "running", "collecting")  # its claim stands
        link.silent.clear()

        wait_job(video, timeout=180, engine=small_engine)
        assert video.artifacts.filter(name="video.mp4").exists()
        assert far.counters()["renders_submitted"] == 1  # rendered once
    finally:
        link.close()
