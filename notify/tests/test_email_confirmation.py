"""Email confirmation (notify.confirm): an email channel sends nothing until someone reading its address opened
the link mailed to it and pressed "Confirm". Through the pages, a signed-out browser for the link, and the mail
task run in place where its after-commit enqueue fires."""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest
import time_machine
from celery import current_app
from django.core import mail
from django.db import IntegrityError, transaction
from django.test import Client
from django.utils import timezone

from jobs.core.transitions import job_transition
from jobs.models import Job
from jobs.tests.ui_fixtures import make_job
from notify import confirm
from notify import tasks as _tasks  # noqa: F401 - registers confirm_mail: an eager run needs the task itself
from notify.job_news import job_entered
from notify.models import Channel, Delivery, EmailConfirmation
from notify.services import delivery_attempt

pytestmark = pytest.mark.django_db
ADD = "/notify/channels/add/"
ADDRESS = "grandma@example.org"
LINK = re.compile(r"https://hub\.example\.lan(/notify/confirm/[^/\s]+/)")


@pytest.fixture(autouse=True)
def hub(settings):
    """Mail through locmem; links on HUB_PUBLIC_URL; tasks run in place when their enqueue fires (the enqueue
    itself still waits for the commit: the tests capture it), so the mail is the task's real work."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.HUB_PUBLIC_URL = "https://hub.example.lan"
    eager = current_app.conf.task_always_eager
    current_app.conf.task_always_eager = True
    yield settings
    current_app.conf.task_always_eager = eager


def _add(client: Client, capture, **fields: str):
    data = {"kind": "email", "name": "Grandma", "address": ADDRESS, "on_done": "on", **fields}
    with capture(execute=True):
        return client.post(ADD, data)


def _link(message) -> str:
    found = LINK.search(message.body)
    assert found, message.body
    return found.group(1)


def test_a_new_email_channel_sends_nothing_until_its_link_is_confirmed(
    member, member_client, django_capture_on_commit_callbacks, device
):
    answer = _add(member_client, django_capture_on_commit_callbacks)
    assert answer.status_code == 302
    channel = Channel.objects.get()
    assert channel.awaits_confirmation and channel.confirmed_address == ""
    (sent,) = mail.outbox
    assert sent.to == [ADDRESS] and sent.subject == confirm.SUBJECT
    link = _link(sent)

    page = member_client.get("/notify/").content.decode()
    assert f'id="channel-{channel.pk}-unconfirmed"' in page and "waiting for confirmation" in page
    assert f'id="channel-{channel.pk}-resend"' in page and f'id="channel-{channel.pk}-test"' not in page

    # what happens before the address is confirmed: a job's news and the test button send nothing, and say why
    job = make_job(member, device, state="running")
    assert job_transition(job.pk, from_states=["running"], to="done", message="Done.")
    job_entered(job_id=job.pk, state="done", seq=Job.objects.get(pk=job.pk).last_seq)
    (news,) = Delivery.objects.filter(channel=channel)
    assert delivery_attempt(delivery_id=news.pk) == "failed"
    news.refresh_from_db()
    assert news.reason.startswith("not sent: its address has not been confirmed yet")
    refused = member_client.post(f"/notify/channels/{channel.pk}/test/", follow=True).content.decode()
    assert "sends nothing: its address has not been confirmed yet" in refused
    assert len(mail.outbox) == 1 and Delivery.objects.filter(event="test").count() == 0

    # the link: no sign-in; opening it confirms nothing (a mail scanner fetches links), the button does
    reader = Client()
    shown = reader.get(link)
    assert shown.status_code == 200 and b'id="confirm-pending"' in shown.content
    assert "no-cache" in shown["Cache-Control"]
    channel.refresh_from_db()
    assert channel.awaits_confirmation
    done = reader.post(link)
    assert done.status_code == 200 and b'id="confirm-done"' in done.content
    channel.refresh_from_db()
    assert not channel.awaits_confirmation and channel.confirmed_address == ADDRESS

    assert member_client.post(f"/notify/channels/{channel.pk}/test/").status_code == 302
    test = Delivery.objects.get(event="test")
    assert delivery_attempt(delivery_id=test.pk) == "sent" and mail.outbox[-1].to == [ADDRESS]


def test_a_used_replaced_expired_or_unknown_link_gets_a_page_that_says_so(
    member, member_client, django_capture_on_commit_callbacks
):
    _add(member_client, django_capture_on_commit_callbacks)
    channel = Channel.objects.get()
    first = _link(mail.outbox[-1])
    with django_capture_on_commit_callbacks(execute=True):
        resent = member_client.post(f"/notify/channels/{channel.pk}/confirm/", follow=True)
    assert f"A new confirmation link is on its way to {ADDRESS}" in resent.content.decode()
    second = _link(mail.outbox[-1])

    old = Client().post(first)  # a resend replaces the earlier link
    assert old.status_code == 410 and b'id="confirm-replaced"' in old.content
    channel.refresh_from_db()
    assert channel.awaits_confirmation

    assert Client().post(second).status_code == 200
    again = Client().get(second)
    assert again.status_code == 410 and b'id="confirm-used"' in again.content
    assert Client().get("/notify/confirm/not-a-token/").status_code == 404

    with django_capture_on_commit_callbacks(execute=True):
        member_client.post(
            f"/notify/channels/{channel.pk}/", {"name": "Grandma", "address": "g2@example.org"}
        )
    late = _link(mail.outbox[-1])
    with time_machine.travel(timezone.now() + confirm.CONFIRM_TTL + dt.timedelta(minutes=1)):
        expired = Client().post(late)
    assert expired.status_code == 410 and b'id="confirm-expired"' in expired.content
    channel.refresh_from_db()
    assert channel.address == "g2@example.org" and channel.awaits_confirmation


def test_a_new_address_must_be_confirmed_again_and_the_old_link_confirms_nothing(
    member, member_client, django_capture_on_commit_callbacks
):
    _add(member_client, django_capture_on_commit_callbacks)
    channel = Channel.objects.get()
    Client().post(_link(mail.outbox[-1]))
    old_link = _link(mail.outbox[-1])
    with django_capture_on_commit_callbacks(execute=True):
        saved = member_client.post(
            f"/notify/channels/{channel.pk}/", {"name": "Grandma", "address": "other@example.org"}
        )
    assert saved.status_code == 302
    channel.refresh_from_db()
    assert channel.awaits_confirmation and mail.outbox[-1].to == ["other@example.org"]
    assert Client().post(old_link).status_code == 410
    channel.refresh_from_db()
    assert channel.awaits_confirmation


def test_one_confirmation_waits_per_address_at_a_time(
    member, other_client, member_client, django_capture_on_commit_callbacks
):
    _add(member_client, django_capture_on_commit_callbacks)
    refused = _add(other_client, django_capture_on_commit_callbacks, name="Also grandma")
    assert refused.status_code == 400
    shouted = _add(other_client, django_capture_on_commit_callbacks, address=ADDRESS.upper())
    assert shouted.status_code == 400  # one mailbox, however it is written
    assert f"A confirmation mail to {ADDRESS} is already waiting for an answer" in refused.content.decode()
    assert Channel.objects.count() == 1 and len(mail.outbox) == 1

    # deleting the channel withdraws its link: the address may be asked again (by anyone)
    channel = Channel.objects.get()
    member_client.post(f"/notify/channels/{channel.pk}/delete/")
    assert _add(other_client, django_capture_on_commit_callbacks, name="Also grandma").status_code == 302
    assert len(mail.outbox) == 2 and Client().get(_link(mail.outbox[0])).status_code == 410


def test_a_person_causes_at_most_five_confirmation_mails_an_hour(
    member, member_client, django_capture_on_commit_callbacks
):
    _add(member_client, django_capture_on_commit_callbacks)
    channel = Channel.objects.get()
    resend = f"/notify/channels/{channel.pk}/confirm/"
    for _ in range(confirm.MAILS_PER_HOUR - 1):
        with django_capture_on_commit_callbacks(execute=True):
            member_client.post(resend)
    assert len(mail.outbox) == confirm.MAILS_PER_HOUR
    with django_capture_on_commit_callbacks(execute=True):
        page = member_client.post(resend, follow=True).content.decode()
    assert "That is 5 confirmation mails within an hour: ask again in" in page
    assert len(mail.outbox) == confirm.MAILS_PER_HOUR
    # a new channel counts too: deleting and adding again is no way round it
    refused = _add(member_client, django_capture_on_commit_callbacks, address="else@example.org")
    assert refused.status_code == 400 and len(mail.outbox) == confirm.MAILS_PER_HOUR


def test_the_mail_labels_the_name_as_the_askers_words_on_one_plain_line(
    member, member_client, django_capture_on_commit_callbacks
):
    name = "Bank notice\n\nYour account is locked: <b>sign in</b> at https://evil.example/"
    _add(member_client, django_capture_on_commit_callbacks, name=name)
    (sent,) = mail.outbox
    assert 'The hub\'s account "mia" asked for it, and named the channel themselves' in sent.body
    label = [line for line in sent.body.splitlines() if "Bank notice" in line]
    assert label == [
        'Channel: "Bank notice Your account is locked: <b>sign in</b> at https://evil.example/"'
    ]  # one labelled line, plain text (the mail has no HTML part)
    assert sent.alternatives == [] and "Bank notice" not in sent.subject
    page = Client().get(_link(sent)).content.decode()
    assert "&lt;b&gt;sign in&lt;/b&gt;" in page and "<b>sign in</b>" not in page


def test_the_test_message_labels_the_channel_name(member):
    from notify.services import build_message, channel_create

    channel = channel_create(owner=member, kind="email", name="Hook\nPay now", address=ADDRESS)
    delivery = Delivery.objects.create(channel=channel, event="test", key="test:x")
    body = build_message(delivery).body
    assert body.splitlines()[-1] == "Channel: “Hook Pay now”" and not body.startswith("Hook")


def test_the_mail_task_sends_once_and_nothing_for_a_withdrawn_link(member):
    channel = Channel.objects.create(owner=member, kind="email", name="x", address=ADDRESS, display=ADDRESS)
    row = EmailConfirmation.objects.create(channel=channel, address=ADDRESS, requested_by=member)
    assert confirm.confirmation_mail_send(confirmation_id=row.pk, origin="https://hub.example.lan") is True
    assert confirm.confirmation_mail_send(confirmation_id=row.pk, origin="https://hub.example.lan") is False
    confirm.confirmations_cancel(channel=channel)
    EmailConfirmation.objects.filter(pk=row.pk).update(sent_at=None)
    assert confirm.confirmation_mail_send(confirmation_id=row.pk, origin="https://hub.example.lan") is False
    assert len(mail.outbox) == 1


def test_without_an_address_for_links_no_channel_is_added(
    settings, member, django_capture_on_commit_callbacks
):
    settings.HUB_PUBLIC_URL = ""
    settings.ALLOWED_HOSTS = ["hub.lan"]  # Django lets hub.lan:6666 in; hub.links does not
    browser = Client(HTTP_HOST="hub.lan:6666")
    browser.force_login(member)
    answer = _add(browser, django_capture_on_commit_callbacks)
    assert answer.status_code == 400 and "HUB_PUBLIC_URL" in answer.content.decode()
    assert not Channel.objects.exists() and not EmailConfirmation.objects.exists() and mail.outbox == []


def test_the_api_shows_the_wait_and_resends_the_link(
    member, member_client, django_capture_on_commit_callbacks
):
    def api(method: str, path: str, body=None):
        return member_client.generic(method, path, json.dumps(body or {}), content_type="application/json")

    with django_capture_on_commit_callbacks(execute=True):
        made = api("POST", "/api/notify/channels", {"kind": "email", "address": ADDRESS})
    assert made.status_code == 201 and made.json()["awaits_confirmation"] is True
    url = f"/api/notify/channels/{made.json()['id']}"
    with django_capture_on_commit_callbacks(execute=True):
        resent = api("POST", f"{url}/confirm")
    assert resent.status_code == 202 and len(mail.outbox) == 2
    refused = api("POST", f"{url}/test")
    assert refused.status_code == 403 and "not been confirmed yet" in refused.json()["detail"]

    Client().post(_link(mail.outbox[-1]))
    assert api("GET", url).json()["awaits_confirmation"] is False
    again = api("POST", f"{url}/confirm")
    assert again.status_code == 422 and "confirmed already" in again.json()["detail"]


def test_an_expired_link_no_longer_holds_its_address(
    member_client, other_client, django_capture_on_commit_callbacks
):
    _add(member_client, django_capture_on_commit_callbacks)
    first = _link(mail.outbox[-1])
    with time_machine.travel(timezone.now() + confirm.CONFIRM_TTL + dt.timedelta(minutes=1)):
        assert _add(other_client, django_capture_on_commit_callbacks, name="Also").status_code == 302
        assert len(mail.outbox) == 2
        assert Client().post(first).status_code == 410


def test_the_database_itself_keeps_one_open_link_per_address(member, other_member):
    """What holds when two requests race past the check for one address: the second insert fails (and
    ``confirmation_request`` answers it with the same message)."""
    mine = Channel.objects.create(owner=member, kind="email", name="a", address=ADDRESS, display=ADDRESS)
    theirs = Channel.objects.create(
        owner=other_member, kind="email", name="b", address=ADDRESS, display=ADDRESS
    )
    EmailConfirmation.objects.create(channel=mine, address=ADDRESS, open_for=ADDRESS.lower())
    with pytest.raises(IntegrityError), transaction.atomic():
        EmailConfirmation.objects.create(channel=theirs, address=ADDRESS, open_for=ADDRESS.lower())
