"""The invitation flow end to end in Chromium, against the live ASGI server: an admin creates a link on the People
page, a signed-out phone-sized browser opens it, picks a name and password and lands signed in; the link is then spent, and a
second invitation is revoked through the confirmation."""

from __future__ import annotations

import pytest

from conftest import save_screenshot
from hub.accounts.models import Invitation, User

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]
CHOSEN = "plum-kettle-harbour-42"


def test_invite_accept_and_the_link_is_spent(browser, signed_in_page, admin_user, live_server_asgi):
    admin = signed_in_page(admin_user)
    admin.click("text=People")
    admin.select_option("#invite-role", "viewer")
    admin.fill("#invite-expires_days", "3")
    admin.fill("#invite-note", "Oma")
    admin.click("#invite-add")
    link = admin.input_value("#invite-link")
    assert link.startswith(live_server_asgi.extra["url"] + "/accounts/invite/")
    assert admin.is_visible("#invite-copy")
    save_screenshot(admin, "invitation-created")

    # The invitee opens the link on a phone, signed out.
    guest_context = browser.new_context(
        viewport={"width": 390, "height": 844}, base_url=live_server_asgi.extra["url"]
    )
    try:
        guest = guest_context.new_page()
        guest.goto(link)
        assert guest.evaluate("document.documentElement.scrollWidth") <= 390  # nothing sideways
        assert "viewer" in guest.inner_text("#invitation-accept")
        guest.fill("#id_username", "oma")
        guest.fill("#id_password1", "short")
        guest.fill("#id_password2", "short")
        guest.click("#invitation-join")
        guest.wait_for_selector(".field-error")
        assert "too short" in guest.inner_text("#invitation-accept")
        guest.fill("#id_password1", CHOSEN)
        guest.fill("#id_password2", CHOSEN)
        guest.click("#invitation-join")
        guest.wait_for_url(live_server_asgi.extra["url"] + "/")
        guest.click("#menu-toggle")  # at phone width the header folds behind the menu button
        assert "oma" in guest.inner_text(".person") and "Viewer" in guest.inner_text(".person")
        assert "Welcome" in guest.inner_text(".messages")
        save_screenshot(guest, "invitation-accepted")

        guest.goto(link)  # spent: the page says so, and there is no form to fill again
        assert "already used" in guest.inner_text("h1")
        assert guest.locator("#id_password1").count() == 0
    finally:
        guest_context.close()
    oma = User.objects.get(username="oma")
    assert oma.role == "viewer" and oma.check_password(CHOSEN)
    assert Invitation.objects.get(note="Oma").used_by == oma

    # A second link, revoked through the confirmation: "no" keeps it, "yes" withdraws it.
    admin.goto("/accounts/people/")
    assert admin.locator("#invitation-empty").count() == 1  # the used one is no longer waiting
    admin.click("#invite-add")
    second = admin.input_value("#invite-link")
    invitation = Invitation.objects.get(used_at__isnull=True)
    admin.goto("/accounts/people/")
    admin.once("dialog", lambda dialog: dialog.dismiss())
    admin.click(f"#invitation-{invitation.pk} button")
    admin.wait_for_timeout(200)
    invitation.refresh_from_db()
    assert invitation.revoked_at is None
    admin.once("dialog", lambda dialog: dialog.accept())
    admin.click(f"#invitation-{invitation.pk} button")
    admin.wait_for_selector("#invitation-empty")
    invitation.refresh_from_db()
    assert invitation.revoked_at is not None
    admin.goto(second)
    assert "withdrawn" in admin.inner_text("h1")
