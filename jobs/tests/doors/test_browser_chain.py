"""Issue 35's evening in Chromium: one form queues "an image, then animate it, then make 3D of it"; the three jobs
run on the Tiiny emulator with the live worker, and each stored file tells how it was made, the video's and the
3D model's naming the picture they were made from. On a phone's width, by keyboard where it matters."""

from __future__ import annotations

import json
import struct

import pytest
from mutagen.mp4 import MP4
from PIL import Image

from conftest import save_screenshot
from jobs.files import store
from jobs.files.story_formats import KEY
from jobs.models import Artifact, Job, JobLink
from jobs.tests.conftest import wait_job
from jobs.tests.doors.test_browser_jobs import NO_SIDE_SCROLL, _usable_broker_pool  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def told(job: Job, kind: str) -> dict:
    """The story the job's stored result carries in its own format's metadata."""
    art = Artifact.objects.filter(job=job, kind=kind).order_by("id").first()
    assert art is not None, f"job {job.pk} has no {kind}"
    with store.local_path(art.file.name) as path:
        if kind == Artifact.Kind.IMAGE:
            with Image.open(path) as im:
                return json.loads(im.text[KEY])
        if kind == Artifact.Kind.VIDEO:
            return json.loads(MP4(path).tags["\xa9cmt"][0])
        data = path.read_bytes()  # GLB: the JSON chunk's asset.extras
        (json_len,) = struct.unpack("<I", data[12:16])
        return json.loads(data[20 : 20 + json_len])["asset"]["extras"][KEY]


def tab_to(page, selector: str, *, limit: int = 80) -> None:
    """Press Tab until ``selector`` has the focus (it must be reachable by keyboard)."""
    for _ in range(limit):
        if page.evaluate(f"document.activeElement && document.activeElement.matches({selector!r})"):
            return
        page.keyboard.press("Tab")
    pytest.fail(f"{selector} is not reachable by Tab")


def test_an_image_then_animate_it_then_3d_of_it_in_one_form(
    signed_in_page, member, pocket, tiiny, live_worker
):
    tiiny.set_speed(50)
    page = signed_in_page(member, width=390, height=844)  # a phone
    page.goto(f"/jobs/new/?device={pocket.pk}&kind=image")
    page.fill("#id_prompt", "a lighthouse at dusk")
    tab_to(page, "#then-animate")
    page.keyboard.press("Space")
    page.fill("#then-animate-prompt", "the waves roll in")
    page.fill("#then-animate-seconds", "1")
    tab_to(page, "#then-mesh")
    page.keyboard.press("Space")
    page.wait_for_selector("#admission-chain:has-text('3 jobs')", timeout=20000)
    assert "the last ready" in page.inner_text("#admission-chain")
    assert page.evaluate(NO_SIDE_SCROLL), "the form scrolls sideways on a phone"
    save_screenshot(page, "chain-form")
    page.wait_for_function("() => !document.querySelector('.htmx-request')")
    page.focus("#job-submit")
    with page.expect_navigation(timeout=30000):
        page.keyboard.press("Enter")
    image, video, mesh = Job.objects.filter(owner=member).order_by("pk")
    assert page.url.endswith(f"/jobs/{image.pk}/"), page.inner_text("main")[:1500]
    assert (image.kind, video.kind, mesh.kind) == ("image", "video", "mesh")
    links = set(JobLink.objects.values_list("parent_id", "child_id", "field"))
    assert links == {(image.pk, video.pk, "start_image"), (image.pk, mesh.pk, "image")}
    chain = page.inner_text(f"#job-{image.pk}-chain")
    assert f"job {video.pk}" in chain and f"job {mesh.pk}" in chain
    assert page.evaluate(NO_SIDE_SCROLL), "the job page scrolls sideways on a phone"
    for job in (image, video, mesh):
        wait_job(job, timeout=120)
    picture, clip, model = told(image, "image"), told(video, "video"), told(mesh, "mesh")
    assert picture["prompt"] == "a lighthouse at dusk" and picture["job"] == image.pk and picture["model"]
    assert clip["prompt"] == "the waves roll in" and clip["seconds"] == 1
    for story in (clip, model):
        assert [p["job"] for p in story["parents"]] == [image.pk], story
    page.goto(f"/jobs/{video.pk}/")
    assert f"job {image.pk}" in page.inner_text(f"#job-{video.pk}-chain")
    save_screenshot(page, "chain-video")
