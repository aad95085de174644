"""Outbound targets: a channel never reaches the hub's own machine or the private network unless an admin allowed
the host. A real listener on loopback counts every connection: written in any spelling, or behind a name that
resolves to loopback (through the test's own resolver), a target gets nothing, at add time and at send time,
through each way out. Allowed, it gets the message, connected to the address that was checked."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import socket

import pytest
from django.core import mail
from django.core.exceptions import ValidationError
from django.utils import timezone

from notify import crypto, senders, targets
from notify.confirm import confirmation_mail_send
from notify.models import Channel, Delivery, EmailConfirmation, PrivateHost
from notify.services import channel_create, channel_test, channel_update, delivery_attempt
from notify.tests.confirming import confirmed
from notify.tests.test_webpush import Browser

pytestmark = pytest.mark.django_db

#: the loopback listener's address, as a URL may write it
SPELLINGS = [
    "127.0.0.1",
    "2130706433",  # decimal
    "0x7f.0.0.1",  # hex
    "0177.0.0.1",  # octal
    "127.1",  # short
    "[::ffff:127.0.0.1]",  # IPv4-mapped IPv6
    "loop.test",  # a name the test's resolver answers with 127.0.0.1
]


@pytest.fixture
def names(monkeypatch):
    """The test's own resolver, in place of the system's: name -> addresses."""
    table: dict[str, list[str]] = {"loop.test": ["127.0.0.1"], "hook.test": ["127.0.0.1"]}

    def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return table[host]

    monkeypatch.setattr(targets, "resolve", resolve)
    return table


def target(kind: str, host: str, port: int, scheme: str = "http") -> dict:
    """channel_create's arguments for a ``kind`` channel aimed at ``host:port``."""
    if kind == "webhook":
        return {"url": f"http://{host}:{port}/hook"}
    if kind == "apprise-json":
        return {"url": f"json://{host}:{port}/in?method=DELETE&+Authorization=Bearer%20x"}
    if kind == "apprise-ntfy":
        return {"url": f"ntfy://{host}:{port}/topic"}
    return {"subscription": Browser(f"{scheme}://{host}:{port}/push/sub-1").subscription}


def make(member, kind: str, **where) -> Channel:
    base = "browser" if kind == "webpush" else kind.partition("-")[0]
    return channel_create(owner=member, kind=base, name=kind, **where)


KINDS = ["webhook", "apprise-json", "apprise-ntfy", "webpush"]
#: Apprise takes only these spellings in a URL (it refuses the others, or reads them as a topic on ntfy.sh);
#: httpx refuses a leading zero (0177.0.0.1) and pywebpush an IPv6 host: what a library can't reach at all is
#: left out of the send table (the add-time table has every one).
SENDABLE = [
    *[("webhook", s) for s in SPELLINGS if s != "0177.0.0.1"],
    *[(k, s) for k in ("apprise-json", "apprise-ntfy") for s in ("127.0.0.1", "2130706433", "loop.test")],
    *[("webpush", s) for s in SPELLINGS if not s.startswith("[")],
]


#: ntfy reads a host it does not take for one as a topic on ntfy.sh (test_ntfy_reads_an_odd_spelling_as_a_topic)
ADDED = [(k, s) for k in KINDS for s in SPELLINGS if k != "apprise-ntfy" or ("apprise-ntfy", s) in SENDABLE]


@pytest.mark.parametrize(("kind", "spelling"), ADDED)
def test_it_refuses_a_private_target_when_it_is_added(member, receiver, names, kind, spelling):
    r = receiver([200])
    port = r.server.server_address[1]
    where = target(kind, spelling, port)
    if kind == "webpush":
        where = target(kind, spelling, port, scheme="https")
    with pytest.raises(ValidationError) as refused:
        make(member, kind, **where)
    if (kind, spelling) in SENDABLE or not kind.startswith("apprise"):
        assert "private network" in str(refused.value)
    else:  # what Apprise can't read as this host is refused or sent to ntfy.sh: never to loopback
        assert "Apprise does not know this URL" in str(refused.value)
    assert not Channel.objects.exists()
    assert r.connections == 0


@pytest.mark.parametrize(("kind", "spelling"), SENDABLE)
def test_it_sends_nothing_to_a_private_target(member, receiver, names, settings, vapid_key, kind, spelling):
    """The same channel, sent while its host is allowed (the listener gets it: the spelling does lead to
    loopback), then once it no longer is (a name that answered a public address when it was added behaves
    the same): blocked, and the listener sees not even a connection."""
    r = receiver([200])
    port = r.server.server_address[1]
    settings.HUB_NOTIFY_PRIVATE_HOSTS = ["127.0.0.1"]
    channel = make(member, kind, **target(kind, spelling, port))
    assert delivery_attempt(delivery_id=channel_test(channel=channel).pk) == "sent"
    assert r.connections == 1
    settings.HUB_NOTIFY_PRIVATE_HOSTS = []
    Delivery.objects.update(created=timezone.now() - dt.timedelta(hours=1))  # past the test's cooldown

    delivery = channel_test(channel=channel)
    assert delivery_attempt(delivery_id=delivery.pk) == "failed"  # not retried: it would be blocked again
    delivery.refresh_from_db()
    # a push endpoint on plain http is blocked for that before its address is looked at
    assert delivery.reason == ("blocked: not https" if kind == "webpush" else targets.BLOCKED)
    assert r.connections == 1


def test_a_push_endpoint_on_https_is_checked_where_it_connects(member, receiver, names, settings, vapid_key):
    r = receiver([201])
    settings.HUB_NOTIFY_PRIVATE_HOSTS = ["127.0.0.1"]
    channel = make(member, "webpush", **target("webpush", "loop.test", r.server.server_address[1], "https"))
    settings.HUB_NOTIFY_PRIVATE_HOSTS = []

    delivery = channel_test(channel=channel)
    assert delivery_attempt(delivery_id=delivery.pk) == "failed"
    delivery.refresh_from_db()
    assert delivery.reason == targets.BLOCKED
    assert r.connections == 0


@pytest.mark.parametrize("kind", ["webhook", "apprise-json", "webpush"])
def test_an_allowed_name_is_reached_at_the_address_that_was_checked(
    member, receiver, names, settings, vapid_key, kind
):
    """hook.test is only known to the test's resolver: the message arrives because the connection went to the
    address the check resolved, never to the name looked up again (the system can't resolve it)."""
    r = receiver([201])
    port = r.server.server_address[1]
    settings.HUB_NOTIFY_PRIVATE_HOSTS = [f"hook.test:{port}"]
    where = target(kind, "hook.test", port)
    if kind == "webpush":  # a push service on the LAN, allowed by an admin, may speak plain http
        where = {"subscription": Browser(f"http://hook.test:{port}/push/sub-1").subscription}
    channel = make(member, kind, **where)

    assert delivery_attempt(delivery_id=channel_test(channel=channel).pk) == "sent"
    (got,) = r.wait(1)
    assert got.headers["host"] == f"hook.test:{port}"  # the Host header (and TLS's name) stay the URL's


def test_an_admin_allows_a_private_host_on_its_page_for_everyone(member, other_member, receiver, names):
    r = receiver([200])
    port = r.server.server_address[1]
    with pytest.raises(ValidationError):
        make(member, "webhook", url=f"http://hook.test:{port}/a")
    PrivateHost.objects.create(host="hook.test", port=port)

    for person in (member, other_member):
        channel = make(person, "webhook", url=f"http://hook.test:{port}/a")
        assert delivery_attempt(delivery_id=channel_test(channel=channel).pk) == "sent"
    assert len(r.wait(2)) == 2
    with pytest.raises(ValidationError):  # the port is part of what was allowed
        make(member, "webhook", url=f"http://hook.test:{port + 1 if port < 65535 else port - 1}/a")


@pytest.mark.parametrize("spelling", ["0x7f.0.0.1", "0177.0.0.1", "127.1", "[::ffff:127.0.0.1]"])
def test_ntfy_reads_an_odd_spelling_as_a_topic(spelling):
    reached = senders.apprise_target(f"ntfy://{spelling}:8080/topic")
    assert reached is None or reached.host is None  # ntfy.sh's public API, not the spelling's address


def test_the_private_network_and_cloud_metadata_are_refused(member, names):
    names["metadata.test"] = ["169.254.169.254"]
    names["both.test"] = ["93.184.216.34", "10.0.0.7"]  # one public answer does not cover a private one
    for url in (
        "http://10.1.2.3/",
        "http://192.168.1.20:8123/api/webhook/x",
        "http://172.16.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://metadata.test/",
        "http://both.test/",
        "http://[fd00::1]/",
        "http://[fe80::1%25eth0]/",
        "http://0.0.0.0:6379/",
        "http://[::]/",
        "http://100.64.0.1/",
        "http://224.0.0.1/",
        "http://[64:ff9b::7f00:1]/",  # NAT64 of 127.0.0.1
        "http://[2002:7f00:1::]/",  # 6to4 of 127.0.0.1
    ):
        with pytest.raises(ValidationError, match="private network"):
            make(member, "webhook", url=url)


@pytest.mark.parametrize(
    ("spelling", "public"),
    [
        ("127.0.0.1", False),
        ("2130706433", False),
        ("0x7f000001", False),
        ("0177.1", False),
        ("::1", False),
        ("::ffff:10.0.0.1", False),
        ("::7f00:1", False),  # IPv4-compatible
        ("fe80::1%eth0", False),
        ("ff02::1", False),
        ("198.18.0.1", False),
        ("240.0.0.1", False),
        ("8.8.8.8", True),
        ("2606:4700::1111", True),
        ("::ffff:8.8.8.8", True),
        ("64:ff9b::808:808", True),
    ],
)
def test_every_spelling_of_an_address_is_read_as_the_address_it_is(spelling, public):
    ip = targets.literal(spelling)
    assert ip is not None and targets.is_public(ip) is public


def test_a_name_is_not_read_as_an_address():
    assert targets.literal("hooks.example.org") is None
    assert targets.literal("08.1") is None  # not octal: a name (the resolver decides)
    assert targets.literal("0x7f.1") == ipaddress.IPv4Address("127.0.0.1")


def test_apprise_services_whose_target_cant_be_checked_are_refused(member):
    for url in ("mailtos://user:pass@mail.lan", "rsyslog://10.0.0.1", "syslog://"):  # SMTP, UDP, local
        with pytest.raises(ValidationError) as refused:
            make(member, "apprise", url=url)
        assert refused.value.message_dict == {"url": [senders.APPRISE_REFUSED]}
    # one URL that is two, the second one unchecked, is refused whole
    for url in (
        "json://hooks.example.org/x mailtos://user:pass@mail.lan",
        "json://a.example.org/x,rsyslog://10.0.0.1",
    ):
        with pytest.raises(ValidationError, match="One Apprise URL per channel"):
            make(member, "apprise", url=url)
    # stored before the rule: sent nowhere
    for url in ("mailtos://user:pass@mail.lan", "json://hooks.example.org/x rsyslog://10.0.0.1"):
        channel = Channel.objects.create(
            owner=member, kind="apprise", name=url, sealed=crypto.seal({"url": url})
        )
        delivery = channel_test(channel=channel)
        assert delivery_attempt(delivery_id=delivery.pk) == "failed"
        delivery.refresh_from_db()
        assert delivery.reason == "blocked: a kind of Apprise URL the hub does not send to"


def test_the_far_ends_words_never_come_back_in_a_reason(member, receiver, settings, fast_retries):
    """A local service's JSON error (what ntfy's plugin would log and the reason used to repeat)."""
    settings.HUB_NOTIFY_PRIVATE_HOSTS = ["127.0.0.1"]
    said = b'{"code":40001,"http":400,"error":"redis: WRONGPASS lan-secret-detail"}'
    r = receiver([400], body=said)
    for kind in ("apprise-ntfy", "apprise-json", "webhook"):
        channel = make(member, kind, **target(kind, "127.0.0.1", r.server.server_address[1]))
        delivery = channel_test(channel=channel)
        delivery_attempt(delivery_id=delivery.pk)
        delivery.refresh_from_db()
        assert "lan-secret-detail" not in delivery.reason and "WRONGPASS" not in delivery.reason
        assert delivery.reason in ("refused: the service did not take it", "refused: HTTP 400")


def test_a_dead_port_and_a_live_one_differ_only_as_kinds_of_failure(member, receiver, settings, fast_retries):
    settings.HUB_NOTIFY_PRIVATE_HOSTS = ["127.0.0.1"]
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    channel = make(member, "apprise-json", **target("apprise-json", "127.0.0.1", dead))
    delivery = channel_test(channel=channel)
    delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert delivery.reason == "could not connect"


def test_a_push_endpoint_is_https(member, names):
    with pytest.raises(ValidationError, match="https"):
        make(member, "webpush", subscription=Browser("http://push.example.org/send/1").subscription)


def test_mail_to_a_private_address_literal_is_refused_when_added_and_when_sent(member, settings):
    """The mail server is the admin's, but a literal domain tells it where to carry the message: refused at add
    time, and at sending once the host that let it in is no longer allowed."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    with pytest.raises(ValidationError) as refused:
        channel_create(owner=member, kind="email", name="Mail", address="root@[127.0.0.1]")
    assert refused.value.message_dict["address"] == [targets.PRIVATE_MAIL]
    allowed = PrivateHost.objects.create(host="10.0.0.5")
    channel = confirmed(channel_create(owner=member, kind="email", name="Mail", address="root@[10.0.0.5]"))
    allowed.delete()
    mail.outbox.clear()
    delivery = channel_test(channel=channel)
    assert delivery_attempt(delivery_id=delivery.pk) == "failed"
    delivery.refresh_from_db()
    assert delivery.reason == targets.BLOCKED
    assert mail.outbox == []


def test_a_changed_email_address_is_checked_and_so_is_its_confirmation_mail(member, settings):
    """A new address goes through the same check as a first one; its confirmation mail is checked again when the
    worker sends it (it goes out through Django's mail, not through senders.send_email)."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    channel = channel_create(owner=member, kind="email", name="Mail", address="me@example.com")
    origin = lambda: "http://hub.test"  # noqa: E731
    with pytest.raises(ValidationError) as refused:
        channel_update(channel=channel, by=member, link_origin=origin, address="root@[127.0.0.1]")
    assert refused.value.message_dict["address"] == [targets.PRIVATE_MAIL]
    allowed = PrivateHost.objects.create(host="10.0.0.5")
    channel_update(channel=channel, by=member, link_origin=origin, address="root@[10.0.0.5]")
    asked = EmailConfirmation.objects.filter(channel=channel, address="root@[10.0.0.5]").get()
    allowed.delete()
    mail.outbox.clear()
    assert confirmation_mail_send(confirmation_id=asked.pk, origin="http://hub.test") is False
    assert mail.outbox == []


def test_the_webhook_body_is_what_arrives(member, receiver, names, settings):
    """The checked connection changes nothing in what is sent: the same signed JSON."""
    settings.HUB_NOTIFY_PRIVATE_HOSTS = ["hook.test"]
    r = receiver([200])
    channel = make(member, "webhook", url=f"http://hook.test:{r.server.server_address[1]}/in")
    assert delivery_attempt(delivery_id=channel_test(channel=channel).pk) == "sent"
    assert json.loads(r.wait(1)[0].body)["event"] == "test"


def test_every_door_refuses_a_private_target(member, member_client, names):
    """The probe from outside: the page (400) and the API (422, its answer to invalid input) keep nothing."""
    from hub.accounts.tokens import token_create

    answer = member_client.post(
        "/notify/channels/add/", {"kind": "webhook", "url": "http://0x7f.1:6379/", "on_done": "on"}
    )
    assert answer.status_code == 400 and "private network" in answer.content.decode()
    _, raw = token_create(user=member, name="script", scopes=["read", "submit"])
    body = {"kind": "apprise", "url": "json://loop.test:8123/in?method=DELETE"}
    answer = member_client.generic(
        "POST", "/api/notify/channels", json.dumps(body), content_type="application/json",
        headers={"Authorization": f"Bearer {raw}"},
    )  # fmt: skip
    assert answer.status_code == 422 and "private network" in answer.content.decode()
    assert not Channel.objects.exists()


@pytest.mark.parametrize("kind", ["webhook", "apprise-json", "webpush"])
def test_a_name_that_changes_its_answer_is_checked_again_when_sent(
    member, receiver, monkeypatch, settings, vapid_key, kind
):
    """Public when the channel is added, loopback when it is sent (DNS rebinding): the send's own lookup is the
    one checked and connected to, so nothing arrives."""
    answers = iter([["93.184.216.34"]])  # the first lookup (add time); every later one answers loopback
    monkeypatch.setattr(targets, "resolve", lambda host, port: next(answers, ["127.0.0.1"]))
    r = receiver([200])
    channel = make(member, kind, **target(kind, "flip.test", r.server.server_address[1], "https"))

    delivery = channel_test(channel=channel)
    assert delivery_attempt(delivery_id=delivery.pk) == "failed"
    delivery.refresh_from_db()
    assert delivery.reason == targets.BLOCKED
    assert r.connections == 0
