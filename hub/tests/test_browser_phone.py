"""On a phone (390 px) the header is one line: its links fold behind a menu button that works with the keyboard."""

from __future__ import annotations

import pytest

from conftest import save_screenshot
from jobs.tests.ui_fixtures import make_job

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _watch_console(page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(f"console: {msg.text}") if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    return errors


def _box(page, selector: str) -> dict:
    return page.eval_on_selector(selector, "el => el.getBoundingClientRect().toJSON()")


def _header_is_one_line(page) -> None:
    header, brand, button = _box(page, "header.topbar"), _box(page, ".brand"), _box(page, "#menu-toggle")
    assert button["top"] < brand["bottom"] and brand["top"] < button["bottom"], (
        brand,
        button,
    )  # side by side
    assert header["height"] <= max(brand["height"], button["height"]) + 24, header  # padding, no second row
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def _tab_to(page, element_id: str, limit: int = 12) -> None:
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement && document.activeElement.id") == element_id:
            return
    raise AssertionError(f"#{element_id} is not reachable with Tab")


def test_the_phone_header_is_one_line_and_its_menu_works_with_the_keyboard(signed_in_page, member):
    page = signed_in_page(member, width=390, height=844)
    errors = _watch_console(page)
    page.goto("/")
    page.wait_for_selector("#menu-toggle:visible")
    _header_is_one_line(page)
    assert not page.is_visible("nav[aria-label=Main]")
    assert page.get_attribute("#menu-toggle", "aria-expanded") == "false"
    save_screenshot(page, "phone-header-closed")

    _tab_to(page, "menu-toggle")
    page.keyboard.press("Enter")
    assert page.get_attribute("#menu-toggle", "aria-expanded") == "true"
    page.wait_for_selector("nav[aria-label=Main] >> text=Gallery", state="visible")
    save_screenshot(page, "phone-header-open")

    page.keyboard.press("Escape")  # closes it and gives the focus back to the button
    assert page.get_attribute("#menu-toggle", "aria-expanded") == "false"
    assert page.evaluate("document.activeElement.id") == "menu-toggle"

    page.keyboard.press("Space")  # a real button: Space opens it too
    assert page.get_attribute("#menu-toggle", "aria-expanded") == "true"
    page.keyboard.press("Tab")  # Dashboard
    page.keyboard.press("Tab")  # Gallery
    assert page.evaluate("document.activeElement.textContent.trim()") == "Gallery"
    page.keyboard.press("Enter")
    page.wait_for_url("**/jobs/")
    page.wait_for_selector("#menu-toggle:visible")
    assert page.get_attribute("#menu-toggle", "aria-expanded") == "false"
    _header_is_one_line(page)
    page.wait_for_timeout(500)  # late errors (the live socket opening) would show up here
    assert errors == []


def test_wide_screens_keep_the_links_in_the_bar(signed_in_page, admin_user):
    page = signed_in_page(admin_user, width=1280, height=900)
    errors = _watch_console(page)
    page.goto("/")
    assert not page.is_visible("#menu-toggle")
    assert page.is_visible("nav[aria-label=Main] >> text=Gallery")
    assert page.is_visible("#footer-health")  # the admins' status page link
    page.click("#footer-health")
    page.wait_for_url("**/health/")
    assert page.is_visible("text=Parts of the hub")
    assert errors == []


def test_a_long_label_wraps_inside_its_gallery_card(signed_in_page, member, device):

    job = make_job(member, device, state="done", prompt="a_kite_over_the_sunset_with_no_spaces_at_all_" * 3)
    page = signed_in_page(member, width=390, height=844)
    errors = _watch_console(page)
    page.goto("/jobs/")
    title = f"#job-{job.pk}-card .job-card-title"
    page.wait_for_selector(title)
    card, box = _box(page, f"#job-{job.pk}-card"), _box(page, title)
    assert box["left"] >= card["left"] and box["right"] <= card["right"] + 0.5, (box, card)
    assert page.eval_on_selector(title, "el => el.scrollWidth <= el.clientWidth + 1")  # nothing runs out
    assert box["height"] > 30  # it wrapped onto more lines instead
    save_screenshot(page, "gallery-long-label-phone")
    assert errors == []
