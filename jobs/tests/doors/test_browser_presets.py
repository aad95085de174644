"""Presets in Chromium: picking one redraws the new-job form filled in (htmx, no reload; the typed prompt stays),
the job queued from it carries the preset's settings, and "Save as preset" keeps the form's settings; on a phone's
width too. Against the live hub (ASGI) and the Tiiny emulator's real capabilities."""

from __future__ import annotations

import pytest

from conftest import save_screenshot
from jobs.models import Job, Preset
from jobs.tests.doors.test_browser_jobs import off_loop
from jobs.tests.ui_fixtures import VIDEO

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ENABLED = "() => { const b = document.getElementById('job-submit'); return b && !b.disabled; }"
IDLE = "() => !document.querySelector('.htmx-request')"
NO_SIDE_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"


def checked_size(page) -> str | None:
    return page.evaluate(
        "() => { const r = document.querySelector('input[name=size]:checked'); return r && r.value; }"
    )


def test_picking_a_preset_fills_the_form_then_it_queues_with_its_settings(signed_in_page, member, pocket):
    from jobs.queue.presets import preset_create

    canvases = pocket.capabilities["video"][VIDEO]["canvases"]
    tall = canvases[-1]  # not the form's first (default) canvas
    off_loop(
        preset_create,
        by=member,
        kind="video",
        name="tall",
        values={"model": VIDEO, "size": tall, "seconds": 3},
    )
    page = signed_in_page(member, width=390, height=844)  # a phone
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.goto(f"/jobs/new/?device={pocket.pk}&kind=video")
    page.wait_for_selector("#admission")
    assert checked_size(page) != tall
    page.fill("#id_prompt", "a heron at dawn")
    page.evaluate("() => { window.__marker = 'same-page'; }")

    page.focus("#pick-preset")  # a label and a plain select: reachable and usable from the keyboard
    page.select_option("#pick-preset", "tall")
    page.wait_for_function(f"() => document.querySelector('input[name=size][value=\"{tall}\"]')?.checked")
    assert page.input_value("#id_seconds") == "3"
    assert page.input_value("#id_prompt") == "a heron at dawn"  # what was typed stays
    assert page.evaluate("() => window.__marker") == "same-page"  # the form was swapped, the page kept
    assert page.evaluate(NO_SIDE_SCROLL)
    save_screenshot(page, "new-video-preset-picked")

    page.fill("#id_seconds", "2")  # then the person may change any field
    page.wait_for_function(ENABLED, timeout=15000)
    page.click("#job-submit")
    page.wait_for_url("**/jobs/*/", timeout=15000)
    job = off_loop(lambda: Job.objects.get())
    assert (job.params["size"], job.params["seconds"], job.prompt) == (tall, 2, "a heron at dawn")
    assert problems == [], problems


def test_save_as_preset_from_the_form(signed_in_page, member, pocket):
    page = signed_in_page(member)
    page.goto(f"/jobs/new/?device={pocket.pk}&kind=video")
    page.wait_for_selector("#admission")
    page.fill("#id_seconds", "5")
    page.fill("#id_prompt", "not kept")
    page.click("#save-preset summary")
    page.fill("#preset-name", "five seconds")
    page.wait_for_function(IDLE, timeout=15000)  # the summary the typing asked for has come back
    with page.expect_navigation():
        page.click("#preset-save")
    assert "preset=five+seconds" in page.url, page.url
    page.wait_for_selector("#pick-preset option[value='five seconds'][selected]", state="attached")
    assert page.input_value("#id_seconds") == "5"
    preset = off_loop(lambda: Preset.objects.get())
    assert preset.values["seconds"] == "5" and "prompt" not in preset.values
    page.goto("/jobs/presets/")
    assert "five seconds" in page.inner_text("#own-presets")
    save_screenshot(page, "presets-page")
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: nothing sideways, every action reachable
    assert page.evaluate(NO_SIDE_SCROLL)
    page.focus("#rename-" + str(preset.pk))
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.textContent.trim()") == "Rename"
    save_screenshot(page, "presets-page-phone")


def test_a_preset_can_be_picked_before_anything_is_typed(signed_in_page, member, pocket):
    """The picker sends the typed prompt along; an empty (required) prompt must not stop the request, or picking a
    preset first — what a person does — silently does nothing."""
    from jobs.queue.presets import preset_create

    off_loop(preset_create, by=member, kind="video", name="three", values={"model": VIDEO, "seconds": 3})
    page = signed_in_page(member)
    page.goto(f"/jobs/new/?device={pocket.pk}&kind=video")
    page.wait_for_selector("#admission")
    assert page.input_value("#id_seconds") != "3" and page.input_value("#id_prompt") == ""
    page.select_option("#pick-preset", "three")
    page.wait_for_function("() => document.getElementById('id_seconds').value === '3'", timeout=15000)
