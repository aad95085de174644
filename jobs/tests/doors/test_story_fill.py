"""The new-job form filled in from a picture the hub made (``jobs.doors.views.job_from_file``): only the posted
file's settings are read, and a picture without them says so."""

from __future__ import annotations

import html as htmlmod
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from devices.emulator import media as emu
from hub.bodylimit import UPLOAD_ROUTES
from jobs.files import store
from jobs.files.story_formats import PNG_SIGNATURE, _itxt, _png_chunk, png_chunks
from jobs.models import Job
from jobs.tests.ui_fixtures import IMAGE, make_job

pytestmark = pytest.mark.django_db
URL = "/jobs/new/from-file/"


def hub_png(member, device, media, *, prompt="a lighthouse at dusk", seed=77, steps=6) -> bytes:
    job = make_job(member, device, kind="image", state="running", prompt=prompt)
    job.params = {**job.params, "seed": seed, "steps": steps, "size": "512x512"}
    job.save()
    png = emu.png_bytes(prompt=prompt, width=32, height=32)
    return store.read_bytes(store.save_artifact(job, kind="image", name="image-1.png", data=png).file.name)


def png_with_story(story: dict) -> bytes:
    """A PNG that carries ``story`` in its tiiny-hub chunk, made without the hub's writer."""
    chunks = png_chunks(emu.png_bytes(prompt="x", width=16, height=16))
    body = b"".join(_png_chunk(t, b) for t, b in chunks[:1])
    body += _png_chunk(b"iTXt", _itxt("tiiny-hub", json.dumps(story)))
    body += b"".join(_png_chunk(t, b) for t, b in chunks[1:])
    return PNG_SIGNATURE + body


def post(client, device, data: bytes, *, kind="video", name="result.png", htmx=False):
    upload = SimpleUploadedFile(name, data, "image/png")
    headers = {"HX-Request": "true"} if htmx else {}
    return client.post(URL, {"device": device.pk, "kind": kind, "settings_file": upload}, headers=headers)


def field_value(html: str, name: str) -> str | None:
    found = re.search(rf'<input[^>]*name="{name}"[^>]*value="([^"]*)"', html) or re.search(
        rf'<input[^>]*value="([^"]*)"[^>]*name="{name}"', html
    )
    return htmlmod.unescape(found.group(1)) if found else None


def test_the_route_takes_a_file_within_the_upload_ceiling():
    assert reverse("jobs-from-file") == URL and "jobs-from-file" in UPLOAD_ROUTES


def test_the_page_offers_to_fill_in_from_a_picture(member_client, device):
    html = member_client.get(f"/jobs/new/?device={device.pk}&kind=image").content.decode()
    assert 'id="from-file"' in html and 'name="settings_file"' in html and "story-drop.js" in html


def test_a_hub_png_fills_the_form_its_kind_model_and_settings(member_client, member, device, media):
    png = hub_png(member, device, media, prompt="a lighthouse at dusk, “warm”")
    response = post(member_client, device, png, kind="video", htmx=True)  # dropped on the video form
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="new-job"' in html and "Filled in from result.png" in html
    assert 'name="kind" value="image"' in html  # the file's kind, not the form's
    assert re.search(r'<textarea[^>]*name="prompt"[^>]*>\s*a lighthouse at dusk, “warm”</textarea>', html)
    assert field_value(html, "seed") == "77" and field_value(html, "steps") == "6"
    assert field_value(html, "width") == "512" and field_value(html, "height") == "512"  # the form maps size
    assert re.search(rf'<option value="{re.escape(IMAGE)}"[^>]*selected', html)
    assert not Job.objects.filter(state="queued").exists()  # filling in queues nothing


def test_a_png_without_hub_settings_says_so(member_client, device):
    response = post(member_client, device, emu.png_bytes(prompt="x", width=16, height=16), kind="image")
    assert response.status_code == 400
    html = response.content.decode()
    assert "carries no hub settings" in html and 'name="kind" value="image"' in html


def test_a_file_that_is_no_png_says_so(member_client, device):
    response = post(member_client, device, b"GIF89a not a png", kind="image", name="x.gif")
    assert response.status_code == 400 and "carries no hub settings" in response.content.decode()


def test_only_the_posted_file_is_read_never_the_job_it_names(member_client, other_member, device, media):
    theirs = make_job(
        other_member, device, kind="image", state="done", prompt="ann's private birthday surprise"
    )
    theirs.params = {**theirs.params, "seed": 999}
    theirs.save()
    story = {
        "kind": "image",
        "model": IMAGE,
        "prompt": "a kite",
        "job": theirs.pk,
        "url": f"http://x/jobs/{theirs.pk}/",
    }
    response = post(member_client, device, png_with_story(story), kind="image")
    html = response.content.decode()
    assert response.status_code == 200 and "a kite" in html
    assert "birthday surprise" not in html and field_value(html, "seed") in ("", None)


def test_a_model_the_device_lacks_is_named(member_client, device):
    story = {"kind": "image", "model": "someone/Other-Model", "prompt": "a kite"}
    html = post(member_client, device, png_with_story(story), kind="image").content.decode()
    assert "Its model (someone/Other-Model) isn&#x27;t on Pocket" in html


def test_viewers_cannot_fill_in(viewer_client, device):
    response = post(
        viewer_client, device, png_with_story({"kind": "image", "prompt": "a kite"}), kind="image"
    )
    assert response.status_code in (302, 403)


def test_any_capable_device_is_kept(member_client, device):
    story = {"kind": "image", "model": IMAGE, "prompt": "a kite", "seed": 3}
    upload = SimpleUploadedFile("kite.png", png_with_story(story), "image/png")
    response = member_client.post(URL, {"device": "any", "kind": "video", "settings_file": upload})
    html = response.content.decode()
    assert response.status_code == 200 and "Filled in from kite.png" in html
    assert 'name="device" value="any"' in html and 'name="kind" value="image"' in html
    assert field_value(html, "seed") == "3"
