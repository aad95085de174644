"""Single sign-on end to end in Chromium: the hub's real web server configured for the test provider (a real
OpenID Connect provider on loopback, hub/accounts/tests/oidc_provider.py); the person presses "Sign in with …",
signs in at the provider and lands on the hub's dashboard with the role their group maps to. No page of the round
trip trips the hub's Content-Security-Policy."""

from __future__ import annotations

import pytest

from conftest import save_screenshot
from hub.accounts.models import User
from hub.accounts.tests.oidc_provider import (
    CLIENT_ID,
    CLIENT_SECRET,
    PASSWORD,
    add_redirect_uri,
    start_provider,
)
from hub.testing import start_asgi_server

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def hub_with_sso(tmp_path, django_db_blocker):
    provider = start_provider(tmp_path, ["http://127.0.0.1/unused/"])
    try:
        with django_db_blocker.unblock():
            hub = start_asgi_server(
                workers=1,
                HUB_OIDC_ISSUER=provider.extra["issuer"],
                HUB_OIDC_CLIENT_ID=CLIENT_ID,
                HUB_OIDC_CLIENT_SECRET=CLIENT_SECRET,
                HUB_OIDC_NAME="Test Provider",
                HUB_OIDC_ROLE_MAP="hub-admins=admin,family=member",
            )
        try:
            add_redirect_uri(provider, hub.extra["url"] + "/oidc/callback/")
            yield hub, provider
        finally:
            hub.stop()
    finally:
        provider.stop()


def test_a_person_signs_in_through_the_provider_in_a_browser(browser, hub_with_sso):
    hub, provider = hub_with_sso
    context = browser.new_context(base_url=hub.extra["url"])
    problems: list[str] = []
    try:
        page = context.new_page()
        # The hub's pages only: the test provider is a bare Django project (no favicon, a 404 of its own).
        page.on(
            "console",
            lambda m: (
                problems.append(f"{m.location.get('url')}: {m.text}")
                if m.type == "error" and not (m.location.get("url") or "").startswith(provider.extra["url"])
                else None
            ),
        )
        page.goto("/accounts/login/")
        assert page.inner_text("#signin-oidc") == "Sign in with Test Provider"
        page.click("#signin-oidc")
        page.wait_for_url(provider.extra["url"] + "/login/**")
        page.fill("#op-username", "bob")
        page.fill("#op-password", PASSWORD)
        page.click("#op-submit")
        page.wait_for_url(hub.extra["url"] + "/")
        save_screenshot(page, "oidc-signed-in")
        assert "Sign in" not in page.title()
        bob = User.objects.get(username="bob")
        assert bob.role == User.Role.MEMBER
        assert not problems, problems
    finally:
        context.close()
