"""In Chromium at phone width: a token made with an expiry and one device shows both in the list, and the admin
reads its making on the Audit page, filtered, with nothing sideways."""

from __future__ import annotations

import pytest

from conftest import save_screenshot
from hub.accounts.models import ApiToken
from jobs.tests.ui_fixtures import another_tiiny

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_limited_token_on_the_tokens_page_and_in_the_audit_on_a_phone(signed_in_page, admin_user, member):
    pocket = another_tiiny("Pocket")
    another_tiiny("Studio")
    page = signed_in_page(member, width=390, height=844)
    page.goto("/accounts/tokens/")
    page.fill("#id_name", "pocket script")
    page.check("input[name=scopes][value=submit]")
    page.select_option("#id_expires", "7d")
    page.check("input[name=devices][value=Pocket]")
    page.click("#token-add")
    page.wait_for_selector("#new-token")
    token = ApiToken.objects.get(user=member)
    assert token.device_ids == [pocket.pk] and token.expires_at is not None
    row = page.locator(f"#token-{token.pk}")
    assert "only on Pocket" in row.inner_text() and "expires" in row.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    save_screenshot(page, "tokens-limited-phone")

    page = signed_in_page(admin_user, width=390, height=844)
    page.goto("/accounts/people/")
    page.click("#audit-link")
    page.wait_for_selector("#audit-entries")
    page.fill("#id_actor", "mia")
    page.select_option("#id_action", "token-created")
    page.click("#audit-filter button[type=submit]")
    page.wait_for_url("**/accounts/audit/?*")
    rows = page.locator("#audit-entries tbody tr")
    assert rows.count() == 1 and "Token created" in rows.first.inner_text()
    assert "“pocket script”" in rows.first.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    save_screenshot(page, "audit-filtered-phone")
