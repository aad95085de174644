"""The API tokens page in Chromium at phone width: create (shown once), use it against the live server, revoke
through the confirmation, and the token is gone from the page and refused by the API."""

from __future__ import annotations

import httpx
import pytest

from conftest import save_screenshot
from hub.accounts.models import ApiToken

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_create_use_and_revoke_a_token_on_a_phone(signed_in_page, member, live_server_asgi):
    page = signed_in_page(member, width=390, height=844)
    page.click("#menu-toggle")  # at phone width the header's links fold behind the menu button
    page.click("text=API tokens")
    page.fill("#id_name", "phone script")
    page.check("input[name=scopes][value=submit]")
    page.click("#token-add")
    raw = page.input_value("#new-token")
    assert raw.startswith("thub_")
    # Nothing sideways: the new token's box fits the phone's width.
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    save_screenshot(page, "tokens-created-phone")

    base = live_server_asgi.extra["url"]
    ping = httpx.get(f"{base}/api/jobs", headers={"Authorization": f"Bearer {raw}"}, timeout=10)
    assert ping.status_code == 200, ping.text

    page.goto("/accounts/tokens/")
    assert raw not in page.content()
    token = ApiToken.objects.get(user=member)
    page.once("dialog", lambda dialog: dialog.dismiss())  # "no" keeps it
    page.click(f"#token-{token.pk} button")
    page.wait_for_timeout(200)
    token.refresh_from_db()
    assert token.revoked_at is None
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(f"#token-{token.pk} button")
    page.wait_for_selector("#token-empty")
    save_screenshot(page, "tokens-revoked-phone")

    refused = httpx.get(f"{base}/api/jobs", headers={"Authorization": f"Bearer {raw}"}, timeout=10)
    assert refused.status_code == 401
    assert "revoked" in refused.json()["detail"]
