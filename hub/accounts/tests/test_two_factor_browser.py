"""Two factors in Chromium against the live web server: a member sets up an authenticator from the page (the QR
code is an SVG image under the hub's Content-Security-Policy, no console error), sees ten recovery codes once,
signs out, and signs in again with the password and then a code."""

from __future__ import annotations

import base64
from urllib.parse import urlsplit

import pytest
from django_otp.oath import totp

from conftest import PASSWORD, save_screenshot
from hub.accounts import two_factor

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _code(secret: str, drift: int = 0) -> str:
    key = base64.b32decode(secret + "=" * (-len(secret) % 8))
    return f"{totp(key, 30, 0, 6, drift):06d}"


def test_a_member_sets_up_two_factors_and_signs_in_with_a_code(signed_in_page, member):
    page = signed_in_page(member)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto("/accounts/settings/")
    page.click("#settings-2fa")
    page.click("#tfa-setup")
    page.wait_for_selector("#tfa-qr")
    page.wait_for_function("document.getElementById('tfa-qr').complete")
    assert page.evaluate("document.getElementById('tfa-qr').naturalWidth") > 0  # the QR image drew
    secret = page.inner_text("#tfa-secret").strip()
    page.fill("#id_code", _code(secret))
    page.click("#tfa-confirm")
    codes = page.locator("#tfa-codes li").all_inner_texts()
    assert len(codes) == 10
    save_screenshot(page, "two-factor-codes")
    assert two_factor.has_second_factor(member)

    page.context.clear_cookies()
    page.goto("/accounts/login/")
    page.fill("#id_username", member.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/accounts/2fa/code/")
    page.fill("#id_code", _code(secret, drift=1))  # the next step's: the one used to set up is spent
    page.click("#code-submit")
    page.wait_for_url(lambda url: urlsplit(url).path == "/")  # the dashboard, signed in
    assert not errors, errors
