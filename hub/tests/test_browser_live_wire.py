from __future__ import annotations

import pytest

from conftest import save_screenshot

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_the_dashboard_shows_a_worker_push_without_reload(signed_in_page, admin_user, live_worker):
    page = signed_in_page(admin_user)  # the check's card is shown to admins only
    page.wait_for_function("() => document.body.dataset.live === 'open'", timeout=15000)
    page.evaluate("window.__marker = 'same-page'")
    page.click("#live-wire-button")
    page.wait_for_selector("#live-wire:has-text('A worker answered at')", timeout=20000)
    assert page.evaluate("window.__marker") == "same-page"  # no reload happened
    save_screenshot(page, "dashboard-live-wire")


def test_the_login_page_fits_a_phone(browser, live_server_asgi):
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, base_url=live_server_asgi.extra["url"]
    )
    page = context.new_page()
    page.goto("/accounts/login/")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    save_screenshot(page, "login-phone")
    context.close()
