"""Chains with the real engine: Celery workers and beat, the Tiiny emulator over HTTP.

An image, then a video that starts from it and a 3D model of it: the children wait, the image's result is stored,
they run with the picture as their input (fitted to the video's canvas). And the worker SIGKILLed again and again
around the moment a parent's result is stored and it becomes done (the release is in that transaction): every
child still runs exactly once.
"""

from __future__ import annotations

import time

import pytest
from PIL import Image

from hub.testing import wait_for
from jobs.core.links import ResultRef
from jobs.files import store
from jobs.models import Job, JobLink, JobState
from jobs.queue.services import job_submit
from jobs.tests.conftest import wait_job

pytestmark = pytest.mark.integration

VIDEO = "MiniMaxAI/MiniMax-H3-Turbo"
IMAGE = "Tongyi-MAI/Z-Image-Turbo"
MESH = "tencent/Hunyuan3D-2.1"


def image(member, device, prompt: str = "a lighthouse at dusk") -> Job:
    return job_submit(
        owner=member,
        device=device,
        kind="image",
        model_id=IMAGE,
        params={"prompt": prompt, "size": "512x512", "n": 1, "steps": 8},
    )


def animate(member, device, parent: Job) -> Job:
    return job_submit(
        owner=member,
        device=device,
        kind="video",
        model_id=VIDEO,
        params={"prompt": f"{parent.prompt}, waves rolling", "size": "832x480", "seconds": 2, "steps": 4},
        upload_files={"start_image": ResultRef(parent.pk)},
    )


def test_an_image_then_a_video_of_it_then_3d_of_it(engine, tiiny, pocket, member):
    tiiny.set_speed(50)
    parent = image(member, pocket)
    video = animate(member, pocket, parent)
    mesh = job_submit(
        owner=member,
        device=pocket,
        kind="mesh",
        model_id=MESH,
        params={"stages": ["shape", "export"], "format": "glb"},
        upload_files={"image": ResultRef(parent.pk)},
    )
    assert video.state == mesh.state == JobState.HELD
    for job in (parent, video, mesh):
        wait_job(job, timeout=90, engine=engine)
    with store.local_path(video.params["files"]["start_image"]) as path, Image.open(path) as im:
        assert (im.size, im.format) == ((832, 480), "PNG")  # the 512x512 picture on the video's canvas
    assert mesh.params["files"]["image"].endswith("image.png")
    ready = [e for e in video.events.order_by("seq") if e.message.startswith("Ready")]
    assert len(ready) == 1 and f"job {parent.pk}'s image-1.png" in ready[0].message
    assert video.started_at >= parent.finished_at
    assert tiiny.counters()["renders_submitted"] == 1  # the one video, sent once


def test_every_child_runs_once_while_the_worker_is_killed_around_its_parents_end(
    engine, tiiny, pocket, member
):
    tiiny.set_speed(50)
    chains = []
    for i in range(3):
        parent = image(member, pocket, f"a lighthouse at dusk, take {i}")
        chains.append((parent, animate(member, pocket, parent)))
    kills = 0
    for parent, _child in chains:
        # Kill the worker as soon as the parent is saving its result or has just become done (its children
        # released in that transaction), then start another: recovery finishes what the dead one began.
        def ending(p=parent) -> bool:
            p.refresh_from_db()
            return p.state in (JobState.COLLECTING, JobState.DONE)

        wait_for(ending, timeout=90, what=f"job {parent.pk} to end")
        engine.kill_worker("e1")
        kills += 1
        time.sleep(0.3)
        engine.start_worker("e1")
    for parent, child in chains:
        wait_job(parent, timeout=120, engine=engine)
        wait_job(child, timeout=120, engine=engine)
    assert kills == 3
    for parent, child in chains:
        link = JobLink.objects.get(child=child)
        assert link.parent_id == parent.pk and link.released_at is not None and link.used == "image-1.png"
        assert child.events.filter(message__startswith="Ready").count() == 1  # released once
        assert child.events.filter(state=JobState.HELD).count() == 1  # and never held again
    assert tiiny.counters()["renders_submitted"] == len(chains)  # each video sent to the device once
