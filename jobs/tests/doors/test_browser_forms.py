"""The submit form in Chromium follows the model without a reload and disables its button while refused (issue 11).

Against the live hub (ASGI) and the Tiiny emulator's real capabilities: Foundation-1 and SongGeneration.
"""

from __future__ import annotations

import pytest

from conftest import save_screenshot

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SONG = "tencent/SongGeneration-v2-large"
LOOP = "RoyalCities/Foundation-1"
# Functions, not expressions: Playwright evals a bare expression string in the page, which the CSP refuses.
DISABLED = "() => { const b = document.getElementById('job-submit'); return b && b.disabled; }"
ENABLED = "() => { const b = document.getElementById('job-submit'); return b && !b.disabled; }"
IDLE = "() => !document.querySelector('.htmx-request')"


def watch_console(page) -> list[str]:
    problems: list[str] = []
    page.on(
        "console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None
    )
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    return problems


def test_the_music_form_follows_the_model_and_refuses_a_300_second_song(signed_in_page, member, pocket):
    page = signed_in_page(member)
    problems = watch_console(page)
    page.goto(f"/jobs/new/?device={pocket.pk}&kind=music")
    page.wait_for_selector("#admission", timeout=10000)
    assert page.get_attribute("#id_model", "name") == "model"
    models = page.eval_on_selector_all("#id_model option", "els => els.map(e => e.value)")
    assert SONG in models and LOOP in models, models
    page.select_option("#id_model", LOOP)
    page.wait_for_selector("#id_prompt", timeout=10000)
    assert page.query_selector("#id_caption") is None
    page.fill("#id_prompt", "warm analog drums")
    page.evaluate("window.__marker = 'same-page'")

    # SongGeneration: its fields arrive, Foundation-1's prompt goes, without a reload.
    page.select_option("#id_model", SONG)
    page.wait_for_selector("#id_caption", timeout=10000)
    page.wait_for_selector("#id_prompt", state="detached", timeout=10000)
    assert page.query_selector("#id_lyrics") and page.query_selector("#id_generation_type")
    assert page.evaluate("window.__marker") == "same-page"

    page.fill("#id_caption", "a slow ballad about kites")
    page.fill("#id_lyrics", "[verse]\nup we go")
    page.fill("#id_seconds", "300")
    page.wait_for_function(DISABLED, timeout=10000)
    why = page.inner_text("#job-submit-why")
    assert "10 to 240 seconds" in why, why
    assert page.get_attribute("#job-submit", "aria-describedby") == "job-submit-why"
    save_screenshot(page, "new-music-refused")

    page.fill("#id_seconds", "30")
    page.wait_for_function(ENABLED, timeout=10000)
    assert page.query_selector("#job-submit-why") is None
    page.wait_for_function(IDLE, timeout=10000)
    # What was typed survived every swap of the summary and the button.
    assert page.input_value("#id_caption") == "a slow ballad about kites"
    assert page.input_value("#id_lyrics") == "[verse]\nup we go"
    assert page.evaluate("window.__marker") == "same-page"
    page.wait_for_timeout(300)  # late console messages still count
    assert problems == [], problems
