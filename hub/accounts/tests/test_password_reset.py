"""Resetting one's own password by email (Django's PasswordResetView family), through the locmem backend."""

from __future__ import annotations

import itertools
import re

import pytest
from django.core import mail
from django.test import Client

from hub.accounts import views_invite
from hub.accounts.models import User
from hub.accounts.services import user_set_one_time_password

pytestmark = pytest.mark.django_db
NEW = "a-fresh-start-2026"
LOCMEM = "django.core.mail.backends.locmem.EmailBackend"
_addresses = itertools.count(1)


@pytest.fixture(autouse=True)
def email(settings):
    settings.EMAIL_BACKEND = LOCMEM
    settings.HUB_PUBLIC_URL = "https://hub.example.lan"
    return settings


def stranger() -> Client:
    return Client(REMOTE_ADDR=f"10.34.{next(_addresses)}.1")  # the reset throttle counts per address


@pytest.fixture
def mia(member):
    User.objects.filter(pk=member.pk).update(email="mia@example.com")
    member.refresh_from_db()
    return member


def test_the_login_page_links_to_the_reset():
    html = Client().get("/accounts/login/").content.decode()
    assert 'href="/accounts/password/reset/"' in html and "Forgot your password?" in html


def test_a_reset_by_email_end_to_end(mia, admin_user):
    user_set_one_time_password(user=mia, by=admin_user)  # a reset by email also ends "must change"
    browser = stranger()
    assert browser.get("/accounts/password/reset/").status_code == 200
    response = browser.post("/accounts/password/reset/", {"email": "MIA@example.com"})
    assert response.status_code == 302 and response["Location"] == "/accounts/password/reset/sent/"
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["mia@example.com"] and message.subject == "Reset your Tiiny Hub password"
    link = re.search(r"https://hub\.example\.lan(/accounts/password/reset/\S+/)", message.body)
    assert link, message.body  # built on HUB_PUBLIC_URL, not on the address the request came in on
    page = browser.get(link.group(1), follow=True)
    assert page.status_code == 200 and b'name="new_password1"' in page.content
    form_url = page.redirect_chain[-1][0]  # Django swaps the token for a session marker
    bad = browser.post(form_url, {"new_password1": NEW, "new_password2": NEW + "x"})
    assert bad.status_code == 400
    done = browser.post(form_url, {"new_password1": NEW, "new_password2": NEW})
    assert done.status_code == 302 and done["Location"] == "/accounts/password/reset/done/"
    mia.refresh_from_db()
    assert mia.check_password(NEW) and not mia.must_change_password
    assert browser.get(link.group(1), follow=True).content.count(b'id="reset-link-bad"') == 1  # spent
    assert stranger().post("/accounts/login/", {"username": "mia", "password": NEW}).status_code == 302


def test_it_never_tells_whether_an_address_is_known(mia):
    known = stranger().post("/accounts/password/reset/", {"email": "mia@example.com"})
    unknown = stranger().post("/accounts/password/reset/", {"email": "nobody@example.com"})
    assert (known.status_code, known["Location"]) == (unknown.status_code, unknown["Location"])
    assert len(mail.outbox) == 1
    sent = stranger().get(known["Location"]).content
    assert b"If that address belongs to someone" in sent


def test_a_bad_address_is_a_400_and_a_bad_link_says_so(mia):
    response = stranger().post("/accounts/password/reset/", {"email": "not an address"})
    assert response.status_code == 400 and not mail.outbox
    bad = stranger().get("/accounts/password/reset/MQ/not-a-token/")
    assert bad.status_code == 200 and b'id="reset-link-bad"' in bad.content
    assert b'name="new_password1"' not in bad.content


def test_without_email_the_page_says_to_ask_an_admin(settings, mia):
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    response = stranger().get("/accounts/password/reset/")
    assert response.status_code == 200 and b"one-time password" in response.content
    assert b'name="email"' not in response.content
    stranger().post("/accounts/password/reset/", {"email": "mia@example.com"})
    assert not mail.outbox


def test_too_many_requests_from_one_address_send_nothing_more(mia, monkeypatch):
    monkeypatch.setattr(views_invite, "RESET_REQUESTS_PER_HOUR", 2)
    browser = stranger()
    for _ in range(2):
        assert browser.post("/accounts/password/reset/", {"email": "mia@example.com"}).status_code == 302
    refused = browser.post("/accounts/password/reset/", {"email": "mia@example.com"})
    assert refused.status_code == 429 and b'id="reset-throttled"' in refused.content
    assert len(mail.outbox) == 2
