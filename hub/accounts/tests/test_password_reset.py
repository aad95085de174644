"""Resetting one's own password by email (Django's PasswordResetView family), through the locmem backend."""

from __future__ import annotations

import itertools
import re

import pytest
from django.core import mail
from django.test import Client
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from hub.accounts import views_invite
from hub.accounts.models import User
from hub.accounts.services import password_reset_mail_send, user_set_one_time_password
from hub.accounts.tasks import password_reset_mail

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


def _ask(browser: Client, address: str, capture) -> tuple:
    """Ask for a reset; return the answer and the mails the request queued, sent here by running the task the
    way a worker would (hub.accounts.tasks.password_reset_mail) once the request's transaction commits."""
    before = len(mail.outbox)
    with capture(execute=False) as queued:
        response = browser.post("/accounts/password/reset/", {"email": address})
    assert (
        len(mail.outbox) == before
    )  # nothing is sent inside the request: a known address must not answer slower
    for callback in queued:
        password_reset_mail(*callback.args)
    return response, queued


def test_a_reset_by_email_end_to_end(mia, admin_user, django_capture_on_commit_callbacks):
    user_set_one_time_password(user=mia, by=admin_user)  # a reset by email also ends "must change"
    browser = stranger()
    assert browser.get("/accounts/password/reset/").status_code == 200
    response, queued = _ask(browser, "MIA@example.com", django_capture_on_commit_callbacks)
    assert response.status_code == 302 and response["Location"] == "/accounts/password/reset/sent/"
    assert [c.args for c in queued] == [(mia.pk, "https://hub.example.lan")]  # ids, no secret in the broker
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


def test_a_host_that_is_not_listed_with_its_port_gets_no_link_mailed(
    settings, mia, django_capture_on_commit_callbacks
):
    settings.HUB_PUBLIC_URL = ""
    settings.ALLOWED_HOSTS = ["hub.lan", ".example.com"]  # Django lets both requests below in
    for host in ("hub.lan:6666", "attacker.example.com"):
        browser = Client(REMOTE_ADDR=f"10.34.{next(_addresses)}.1", HTTP_HOST=host)
        with django_capture_on_commit_callbacks(execute=True) as queued:
            response = browser.post("/accounts/password/reset/", {"email": "mia@example.com"})
        assert response.status_code == 503 and b'id="reset-no-link"' in response.content
        assert b"HUB_PUBLIC_URL" in response.content and host.encode() not in response.content
        assert queued == [] and mail.outbox == []
    # Listed as written, port included: that address is meant.
    settings.ALLOWED_HOSTS = ["hub.lan", "hub.lan:6666"]
    listed = Client(REMOTE_ADDR=f"10.34.{next(_addresses)}.1", HTTP_HOST="hub.lan:6666")
    response, queued = _ask(listed, "mia@example.com", django_capture_on_commit_callbacks)
    assert response.status_code == 302 and [c.args for c in queued] == [(mia.pk, "http://hub.lan:6666")]


def test_it_never_tells_whether_an_address_is_known(mia, django_capture_on_commit_callbacks):
    known, queued_known = _ask(stranger(), "mia@example.com", django_capture_on_commit_callbacks)
    unknown, queued_unknown = _ask(stranger(), "nobody@example.com", django_capture_on_commit_callbacks)
    assert (known.status_code, known["Location"]) == (unknown.status_code, unknown["Location"])
    assert len(queued_known) == 1 and queued_unknown == [] and len(mail.outbox) == 1
    sent = stranger().get(known["Location"]).content
    assert b"If that address belongs to someone" in sent


def test_with_the_broker_down_a_known_address_still_gets_the_same_page(
    mia, django_capture_on_commit_callbacks
):
    from hub.testing import broker_unreachable

    with broker_unreachable():
        with django_capture_on_commit_callbacks(execute=True):
            known = stranger().post("/accounts/password/reset/", {"email": "mia@example.com"})
    unknown = stranger().post("/accounts/password/reset/", {"email": "nobody@example.com"})
    assert (
        (known.status_code, known["Location"])
        == (unknown.status_code, unknown["Location"])
        == (
            302,
            "/accounts/password/reset/sent/",
        )
    )  # not a 500 that only known addresses get
    assert mail.outbox == []


def test_nobody_deactivated_or_without_an_address_gets_mail(mia, admin_user):
    assert password_reset_mail_send(user_id=mia.pk, base_url="http://hub") is True
    User.objects.filter(pk=mia.pk).update(is_active=False)
    assert password_reset_mail_send(user_id=mia.pk, base_url="http://hub") is False
    assert password_reset_mail_send(user_id=admin_user.pk, base_url="http://hub") is False  # no address
    assert password_reset_mail_send(user_id=999999, base_url="http://hub") is False  # gone
    assert len(mail.outbox) == 1


def test_a_bad_address_is_a_400_and_a_bad_link_says_so(mia):
    response = stranger().post("/accounts/password/reset/", {"email": "not an address"})
    assert response.status_code == 400 and not mail.outbox
    bad = stranger().get("/accounts/password/reset/MQ/not-a-token/")
    assert bad.status_code == 200 and b'id="reset-link-bad"' in bad.content
    assert b'name="new_password1"' not in bad.content


def test_without_email_the_page_says_to_ask_an_admin(settings, mia, django_capture_on_commit_callbacks):
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    response = stranger().get("/accounts/password/reset/")
    assert response.status_code == 200 and b"one-time password" in response.content
    assert b'name="email"' not in response.content
    with django_capture_on_commit_callbacks(execute=False) as queued:
        stranger().post("/accounts/password/reset/", {"email": "mia@example.com"})
    assert queued == []


def test_too_many_requests_from_one_address_send_nothing_more(
    mia, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(views_invite, "RESET_REQUESTS_PER_HOUR", 2)
    browser = stranger()
    for _ in range(2):
        assert browser.post("/accounts/password/reset/", {"email": "mia@example.com"}).status_code == 302
    with django_capture_on_commit_callbacks(execute=False) as queued:
        refused = browser.post("/accounts/password/reset/", {"email": "mia@example.com"})
    assert refused.status_code == 429 and b'id="reset-throttled"' in refused.content
    assert queued == []


@pytest.mark.integration
def test_a_real_worker_sends_the_mail(transactional_db, live_worker, mia):
    """The request enqueues after commit, the session's Celery worker sends: its backend is the console
    (the default), so the mail shows in the worker's own log, its link masked (no log line holds a token)."""
    from hub.testing import wait_for

    response = stranger().post("/accounts/password/reset/", {"email": "mia@example.com"})
    assert response.status_code == 302 and not mail.outbox
    uid = urlsafe_base64_encode(force_bytes(mia.pk))
    wanted = "https://hub.example.lan/accounts/password/reset/***/***/"
    wait_for(lambda: wanted in live_worker.log_tail(400), timeout=30, what="the reset mail", proc=live_worker)
    assert "Reset your Tiiny Hub password" in live_worker.log_tail(400)
    assert f"/reset/{uid}/" not in live_worker.log_tail(400)
