"""REST API /api/notify: notification channels and their deliveries, with real tokens through the whole stack.

The third door to what the Notifications pages do: the same rules (``notify.selectors``), the same checks and
words (``ChannelForm`` and ``notify.services``), and secrets that go in but never come out (the leak guard
also checks every answer for each URL and secret ``notify.crypto.seal`` ever saw).
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.test import Client
from django.utils import timezone

from hub.accounts.tokens import token_create
from notify import services
from notify.crypto import unseal
from notify.models import Channel, Delivery
from notify.services import channel_create
from notify.tests.confirming import confirmed

pytestmark = pytest.mark.django_db

LIST = "/api/notify/channels"
SECRET = "whsec-api-9c8b7a6f5e4d"
HOOK_TOKEN = "tok-api-11aa22bb33cc"
HOOK = f"https://hooks.example.org/in/{HOOK_TOKEN}"
NTFY = "ntfy://api-private-topic-77"


def token_client(user, scopes=("read", "submit")) -> Client:
    _, raw = token_create(user=user, name="script", scopes=list(scopes))
    return Client(headers={"Authorization": f"Bearer {raw}"})


@pytest.fixture
def api(admin_user, member, other_member, viewer):
    """mia owns the channels, otto is another member, vic a viewer (his token only reads), ada an admin."""
    return {
        "owner": token_client(member),
        "other": token_client(other_member),
        "viewer": token_client(viewer, scopes=("read",)),
        "admin": token_client(admin_user),
        "anon": Client(),
    }


def send(client: Client, method: str, url: str, body=None):
    data = body if isinstance(body, (str, bytes)) else json.dumps(body if body is not None else {})
    return client.generic(method, url, data, content_type="application/json")


def one(path: str = "") -> str:
    return f"{LIST}/{path}".rstrip("/")


def no_secret_in(answer, *secrets: str) -> None:
    text = answer.content.decode() + " ".join(f"{k}: {v}" for k, v in answer.items())
    for secret in secrets:
        assert secret not in text, f"a secret reached the answer ({answer.status_code})"


@pytest.fixture
def hook(member):
    return channel_create(owner=member, kind="webhook", name="Home Assistant", url=HOOK, secret=SECRET)


@pytest.fixture
def household(admin_user):
    return channel_create(
        owner=None, kind="email", name="Box", address="box@example.org", on_queue_empty=True
    )


# -- the documentation --------------------------------------------------------------------------------------------
def test_openapi_lists_the_notify_routes(client):
    schema = client.get("/api/openapi.json").json()
    paths = schema["paths"]
    expected = {
        "/api/notify/channels": {"get", "post"},
        "/api/notify/channels/{channel_id}": {"get", "patch", "delete"},
        "/api/notify/channels/{channel_id}/test": {"post"},
        "/api/notify/channels/{channel_id}/deliveries": {"get"},
    }
    for path, methods in expected.items():
        assert path in paths, path
        assert set(paths[path]) >= methods, (path, set(paths[path]))
        for method in methods:
            operation = paths[path][method]
            assert operation["tags"] == ["notifications"] and operation.get("summary")
            assert "404" in operation["responses"] or path == "/api/notify/channels"
    body = paths["/api/notify/channels"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    fields = schema["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]["properties"]
    assert {"kind", "name", "url", "secret", "address", "household", "on_done"} <= set(fields)
    out = schema["components"]["schemas"]["ChannelOut"]["properties"]
    assert "display" in out and not {"url", "secret", "sealed"} & set(out)  # a URL goes in, never comes out
    assert "429" in paths["/api/notify/channels/{channel_id}/test"]["post"]["responses"]


# -- adding ---------------------------------------------------------------------------------------------------
def test_it_adds_each_kind_and_shows_only_the_masked_settings(member, api):
    answer = send(
        api["owner"], "POST", LIST, {"kind": "webhook", "name": "HA", "url": HOOK, "secret": SECRET}
    )
    assert answer.status_code == 201, answer.content
    out = answer.json()
    assert out["kind"] == "webhook" and out["name"] == "HA" and out["household"] is False
    assert out["display"] == "https://hooks.example.org/… · signed"
    assert out["enabled"] is True and out["events"] == ["job.done", "job.failed"]  # the add form's defaults
    assert (out["on_done"], out["on_failed"], out["on_started"]) == (True, True, False)
    assert out["api_url"].endswith(f"/api/notify/channels/{out['id']}")
    assert out["web_url"].endswith(f"/notify/channels/{out['id']}/") and "url" not in out
    no_secret_in(answer, SECRET, HOOK_TOKEN, HOOK)
    channel = Channel.objects.get(pk=out["id"])
    assert channel.owner == member and unseal(channel.sealed) == {"url": HOOK, "secret": SECRET}

    answer = send(
        api["owner"], "POST", LIST, {"kind": "apprise", "url": NTFY, "on_started": True, "enabled": False}
    )
    assert answer.status_code == 201, answer.content
    out = answer.json()
    assert out["display"].endswith(" (ntfy://…)") and "topic" not in out["display"]
    assert out["name"] == "Push service or chat app (Apprise URL)"  # no name: the kind's
    assert out["events"] == ["job.done", "job.failed", "job.started"] and out["enabled"] is False
    no_secret_in(answer, NTFY, "api-private-topic-77")

    answer = send(
        api["owner"], "POST", LIST, {"kind": "email", "address": "mia@example.org", "on_failed": False}
    )
    assert answer.status_code == 201, answer.content
    out = answer.json()
    assert out["address"] == out["display"] == "mia@example.org" and out["events"] == ["job.done"]

    # a webhook without a secret gets one made, which is never shown either
    answer = send(api["owner"], "POST", LIST, {"kind": "webhook", "url": "https://example.org/hook"})
    assert answer.status_code == 201
    made = unseal(Channel.objects.get(pk=answer.json()["id"]).sealed)["secret"]
    assert len(made) >= 32
    no_secret_in(answer, made)
    listed = api["owner"].get(LIST)
    assert listed.status_code == 200 and len(listed.json()) == 4
    no_secret_in(listed, SECRET, HOOK_TOKEN, NTFY, "api-private-topic-77", made)


BAD_INPUT = [
    (
        {"kind": "webhook", "url": "ftp://example.org/x"},
        "url",
        "A webhook URL starts with http:// or https://",
    ),
    ({"kind": "webhook", "url": "https://"}, "url", "names a host"),
    ({"kind": "webhook"}, "url", "Enter the URL."),
    ({"kind": "webhook", "url": "http://[::1/x"}, "url", "not a URL the hub can call"),  # was a 500
    ({"kind": "webhook", "url": "https://example.org:99999/x"}, "url", "check the host and the port"),
    ({"kind": "webhook", "url": "https://exa mple.org/x"}, "url", "A URL has no spaces in it"),
    ({"kind": "apprise", "url": "nosuch://x"}, "url", "Apprise does not know this URL"),
    ({"kind": "email"}, "address", "Enter the address to write to."),
    ({"kind": "email", "address": "not-an-address"}, "address", "Enter a valid email address."),
    ({"kind": "sms", "url": "https://example.org/x"}, "kind", "Not a kind of channel: choose email, apprise"),
    ({"kind": "browser"}, "kind", "Web Push is turned on from the Notifications page"),
    ({}, "kind", "This field is required."),
    ({"kind": "email", "address": "a@example.org", "name": "n" * 101}, "name", "at most 100 characters"),
    ({"kind": "webhook", "url": "https://example.org/" + "x" * 2000}, "url", "at most 2000 characters"),
    (
        {"kind": "webhook", "url": "https://example.org/", "secret": "s" * 201},
        "secret",
        "at most 200 characters",
    ),
    ({"kind": "email", "address": "a@example.org", "name": 5}, "name", "valid string"),
    ({"kind": "email", "address": "a@example.org", "on_done": "maybe"}, "on_done", "valid boolean"),
    ({"kind": "email", "address": ["a@example.org"]}, "address", "valid string"),
    ({"kind": "email", "address": "a@example.org", "colour": "red"}, "colour", "Unknown field."),
    (
        {"kind": "email", "address": "a@example.org", "on_queue_empty": True},
        "on_queue_empty",
        "Not a field of",
    ),
    ({"kind": "email", "address": "a@example.org", "household": "perhaps"}, "household", "valid boolean"),
]


@pytest.mark.parametrize(("body", "field", "words"), BAD_INPUT)
def test_bad_input_is_a_422_naming_the_field_and_nothing_is_saved(api, body, field, words):
    answer = send(api["owner"], "POST", LIST, body)
    assert answer.status_code == 422, answer.content
    out = answer.json()
    assert words in " ".join(out["errors"][field]), out
    assert words in out["detail"] and out["detail"].startswith(f"{field}: ")
    assert len(out["errors"]) == 1 and len(out["errors"][field]) == 1  # one clear message, not two
    assert not Channel.objects.exists()


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ("not json", 400, "The request body is not valid JSON"),
        ("[1, 2]", 422, "Input should be a valid dictionary or object"),
        ('"kind"', 422, "Input should be a valid dictionary or object"),
        ("", 422, "This field is required."),
    ],
)
def test_an_unreadable_body_is_a_4xx_with_a_message(api, hook, body, status, words):
    for method, url in [("POST", LIST), ("PATCH", one(hook.pk))]:
        answer = send(api["owner"], method, url, body)
        assert answer.status_code == status, answer.content
        assert words in answer.json()["detail"]
    assert Channel.objects.count() == 1 and Channel.objects.get().name == "Home Assistant"


def test_the_api_says_what_the_page_says(member_client, api):
    """One set of words for both doors: the form's and the services' (the page shows them on its form)."""
    page_like = [(b, f) for b, f, _ in BAD_INPUT if b and all(isinstance(v, str) for v in b.values())]
    page_like = [(b, f) for b, f in page_like if f in ("kind", "name", "address", "url", "secret")]
    assert len(page_like) >= 12
    for body, field in page_like:
        answer = send(api["owner"], "POST", LIST, body)
        page = member_client.post("/notify/channels/add/", body)
        assert page.status_code == 400
        html = page.content.decode().replace("&quot;", '"').replace("&#x27;", "'")
        for message in answer.json()["errors"][field]:
            assert message in html, (field, message)
    assert not Channel.objects.exists()


# -- household channels --------------------------------------------------------------------------------------------
def test_household_channels_are_admins_only(admin_user, api, household, hook):
    body = {"household": True, "kind": "email", "address": "box2@example.org", "on_device_locked": True}
    for role in ("owner", "other"):
        answer = send(api[role], "POST", LIST, body)
        assert answer.status_code == 403 and answer.json()["detail"] == "Household channels are for admins."
        # refused before its fields are looked at: nothing more to learn
        assert send(api[role], "POST", LIST, {"household": True, "kind": "x"}).status_code == 403
        assert api[role].get(LIST, {"household": "true"}).status_code == 403
        assert api[role].get(one(household.pk)).status_code == 404
    assert Channel.objects.count() == 2

    answer = send(api["admin"], "POST", LIST, body)
    assert answer.status_code == 201, answer.content
    out = answer.json()
    # (a failed daily backup and a full disk are on for every household channel unless turned off)
    assert out["household"] is True and out["events"] == ["device.locked", "backup.failed", "disk.full"]
    assert Channel.objects.get(pk=out["id"]).owner is None
    # a household channel hears of the box only: a personal event is refused by name
    answer = send(api["admin"], "POST", LIST, {**body, "on_done": True})
    assert (
        answer.status_code == 422
        and "Not a field of a household channel" in answer.json()["errors"]["on_done"][0]
    )

    mine = send(api["admin"], "POST", LIST, {"kind": "email", "address": "ada@example.org"}).json()
    everything = [c["id"] for c in api["admin"].get(LIST).json()]
    assert everything == [mine["id"], household.pk, out["id"]]  # the admin's own first, then the household's
    assert [c["id"] for c in api["admin"].get(LIST, {"household": "false"}).json()] == [mine["id"]]
    assert [c["id"] for c in api["admin"].get(LIST, {"household": "true"}).json()] == [
        household.pk,
        out["id"],
    ]
    assert hook.pk not in everything  # a person's channel is theirs alone, also for admins
    answer = send(
        api["admin"], "PATCH", one(household.pk), {"on_queue_empty": False, "on_device_locked": True}
    )
    assert answer.status_code == 200 and answer.json()["events"] == [
        "device.locked",
        "backup.failed",
        "disk.full",
    ]
    answer = send(api["admin"], "PATCH", one(household.pk), {"on_started": True})
    assert answer.status_code == 422 and "Not a field of a household channel" in answer.json()["detail"]
    assert send(api["owner"], "PATCH", one(household.pk), {"name": "x"}).status_code == 404
    household.refresh_from_db()
    assert (household.name, household.on_started, household.on_device_locked) == ("Box", False, True)
    assert api["admin"].get(LIST, {"household": "perhaps"}).status_code == 422


# -- one channel: nobody else's ---------------------------------------------------------------------------------------
def test_another_persons_channel_is_not_found_and_unchanged(api, hook):
    before = (Channel.objects.values().get(pk=hook.pk), Delivery.objects.count())
    for role in ("other", "admin"):
        for method, path, body in [
            ("GET", one(hook.pk), None),
            ("PATCH", one(hook.pk), {"name": "mine now", "enabled": False}),
            ("DELETE", one(hook.pk), None),
            ("POST", one(f"{hook.pk}/test"), None),
            ("GET", one(f"{hook.pk}/deliveries"), None),
        ]:
            answer = send(api[role], method, path, body)
            assert answer.status_code == 404, (role, method, path, answer.content)
            assert answer.json() == {"detail": "No such channel."}
        assert [c["id"] for c in api[role].get(LIST).json()] == []
    for missing in ("999999", "abc", "1e3", "9" * 40, "-1"):
        assert api["owner"].get(one(missing)).json() == {"detail": "No such channel."}
    assert (Channel.objects.values().get(pk=hook.pk), Delivery.objects.count()) == before


def test_signing_in_is_required(api, hook):
    for method, path in [("GET", LIST), ("POST", LIST), ("GET", one(hook.pk)), ("PATCH", one(hook.pk))]:
        answer = send(api["anon"], method, path, {"kind": "email", "address": "x@example.org"})
        assert answer.status_code == 401 and "Authentication required" in answer.json()["detail"]
    bad = Client(headers={"Authorization": "Bearer thub_nope"})
    assert bad.get(LIST).status_code == 401
    assert Channel.objects.count() == 1


def test_a_viewer_reads_their_own_with_a_token_and_manages_them_in_the_browser(viewer, api, viewer_client):
    """The pages let viewers keep their own channels; a read-only token (all a viewer may hold) only reads."""
    mine = channel_create(owner=viewer, kind="email", name="Mail", address="vic@example.org")
    assert [c["id"] for c in api["viewer"].get(LIST).json()] == [mine.pk]
    assert api["viewer"].get(one(mine.pk)).status_code == 200
    assert api["viewer"].get(one(f"{mine.pk}/deliveries")).status_code == 200
    for method, path in [
        ("POST", LIST),
        ("PATCH", one(mine.pk)),
        ("DELETE", one(mine.pk)),
        ("POST", one(f"{mine.pk}/test")),
    ]:
        body = {"kind": "email", "address": "x@example.org"} if path == LIST else {"name": "x"}
        answer = send(api["viewer"], method, path, body)
        assert answer.status_code == 403 and "may only read" in answer.json()["detail"], (method, path)
    assert Channel.objects.count() == 1 and not Delivery.objects.exists()

    # the browser's session: what the page allows, the API allows (a viewer: email to their own address)
    viewer.email = "vic@example.org"
    viewer.save(update_fields=["email"])
    answer = send(viewer_client, "POST", LIST, {"kind": "email", "address": "vic@example.org"})
    assert answer.status_code == 201 and answer.json()["awaits_confirmation"], answer.content
    answer = send(viewer_client, "PATCH", one(mine.pk), {"name": "Renamed"})
    assert answer.status_code == 200 and answer.json()["name"] == "Renamed"


def test_a_session_needs_the_csrf_token_for_changes(member, hook):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(member)
    assert browser.get(LIST).status_code == 200
    answer = send(browser, "PATCH", one(hook.pk), {"name": "x"})
    assert answer.status_code == 403 and "CSRF" in answer.json()["detail"]
    assert Channel.objects.get(pk=hook.pk).name == "Home Assistant"


# -- changing, deleting ------------------------------------------------------------------------------------------
def test_patch_changes_only_what_it_sends_and_keeps_the_secret(api, hook):
    answer = send(api["owner"], "PATCH", one(hook.pk), {"on_started": True, "enabled": False})
    assert answer.status_code == 200, answer.content
    out = answer.json()
    assert out["name"] == "Home Assistant" and out["enabled"] is False
    assert out["events"] == ["job.done", "job.failed", "job.started"]
    no_secret_in(answer, SECRET, HOOK_TOKEN)
    hook.refresh_from_db()
    assert unseal(hook.sealed) == {"url": HOOK, "secret": SECRET}

    answer = send(api["owner"], "PATCH", one(hook.pk), {"name": "HA 2", "on_done": False, "url": ""})
    assert answer.status_code == 200 and answer.json()["name"] == "HA 2"
    assert answer.json()["events"] == ["job.failed", "job.started"]
    hook.refresh_from_db()
    assert unseal(hook.sealed) == {"url": HOOK, "secret": SECRET}  # an empty URL keeps the stored one

    new_hook = "https://other.example.org/in/tok-api-44dd55ee66ff"
    answer = send(api["owner"], "PATCH", one(hook.pk), {"url": new_hook})
    assert answer.status_code == 200 and answer.json()["display"] == "https://other.example.org/… · signed"
    no_secret_in(answer, new_hook, "tok-api-44dd55ee66ff", SECRET)
    hook.refresh_from_db()
    assert unseal(hook.sealed) == {"url": new_hook, "secret": SECRET}

    assert send(api["owner"], "PATCH", one(hook.pk), {}).status_code == 200  # nothing sent, nothing changed
    hook.refresh_from_db()
    assert (hook.name, hook.enabled, hook.on_done, hook.on_failed, hook.on_started) == (
        "HA 2",
        False,
        False,
        True,
        True,
    )


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"url": "ftp://example.org/x"}, "url", "A webhook URL starts with http:// or https://"),
        ({"name": "n" * 101}, "name", "at most 100 characters"),
        ({"enabled": "sometimes"}, "enabled", "valid boolean"),
        ({"kind": "email"}, "kind", "Unknown field."),
        ({"on_queue_empty": True}, "on_queue_empty", "Not a field of a channel being changed"),
        ({"secret": 12}, "secret", "valid string"),
    ],
)
def test_a_bad_change_is_a_422_and_changes_nothing(api, hook, body, field, words):
    before = Channel.objects.values().get(pk=hook.pk)
    answer = send(api["owner"], "PATCH", one(hook.pk), body)
    assert answer.status_code == 422, answer.content
    assert words in " ".join(answer.json()["errors"][field])
    assert Channel.objects.values().get(pk=hook.pk) == before


def test_delete_takes_the_channel_and_its_history(api, hook, household):
    services.channel_test(channel=hook)
    answer = send(api["owner"], "DELETE", one(hook.pk))
    assert answer.status_code == 204 and answer.content == b""
    assert not Channel.objects.filter(pk=hook.pk).exists() and not Delivery.objects.exists()
    assert send(api["owner"], "DELETE", one(hook.pk)).status_code == 404
    assert send(api["owner"], "DELETE", one(household.pk)).status_code == 404  # members: not theirs
    assert send(api["admin"], "DELETE", one(household.pk)).status_code == 204


# -- send a test, deliveries ------------------------------------------------------------------------------------------
def test_send_a_test_is_limited_as_on_the_page(member, member_client, api, hook, monkeypatch):
    answer = send(api["owner"], "POST", one(f"{hook.pk}/test"))
    assert answer.status_code == 202, answer.content
    out = answer.json()
    assert (out["event"], out["status"], out["attempt"], out["channel"]) == ("test", "pending", 1, hook.pk)
    assert Delivery.objects.filter(channel=hook).count() == 1

    answer = send(api["owner"], "POST", one(f"{hook.pk}/test"))
    assert answer.status_code == 429
    detail = answer.json()["detail"]
    assert detail.startswith("A test went to “Home Assistant” moments ago: send another in ")
    assert 1 <= int(answer["Retry-After"]) <= services.TEST_COOLDOWN.total_seconds()
    page = member_client.post(f"/notify/channels/{hook.pk}/test/", follow=True).content.decode()
    assert detail.rsplit(" in ", 1)[0] in page  # the page's words (its seconds may have ticked on)
    assert Delivery.objects.filter(channel=hook).count() == 1

    monkeypatch.setattr(services, "TEST_PER_HOUR", 2)
    Delivery.objects.update(created=timezone.now() - dt.timedelta(minutes=10))
    other = confirmed(channel_create(owner=member, kind="email", name="Mail", address="mia@example.org"))
    assert send(api["owner"], "POST", one(f"{other.pk}/test")).status_code == 202
    answer = send(api["owner"], "POST", one(f"{hook.pk}/test"))
    assert (
        answer.status_code == 429
        and answer.json()["detail"] == "That is 2 tests within an hour: send another in 50 min."
    )
    assert 2940 <= int(answer["Retry-After"]) <= 3000
    assert Delivery.objects.count() == 2


def test_deliveries_come_newest_first_in_pages(api, hook, member):
    now = timezone.now()
    made = []
    for i in range(5):
        d = Delivery.objects.create(
            channel=hook, event="job.done", key=f"job.done:{i}", attempt=1, status="failed",
            reason=f"the receiver answered 50{i}",
        )  # fmt: skip
        made.append(d.pk)
    Delivery.objects.filter(pk__in=made[:2]).update(
        created=now - dt.timedelta(minutes=5)
    )  # equal times: by id
    Delivery.objects.filter(pk__in=made[2:]).update(created=now)
    other_channel = channel_create(owner=member, kind="email", name="Mail", address="mia@example.org")
    Delivery.objects.create(channel=other_channel, event="test", key="test:x")

    url = one(f"{hook.pk}/deliveries")
    first = api["owner"].get(url, {"limit": 2}).json()
    assert [d["id"] for d in first["items"]] == [made[4], made[3]] and first["next"]
    assert first["items"][0]["reason"] == "the receiver answered 504"
    assert (
        first["items"][0]["status_label"] == "Failed"
        and first["items"][0]["event_label"] == "My job finished"
    )
    second = api["owner"].get(url, {"limit": 2, "cursor": first["next"]}).json()
    assert [d["id"] for d in second["items"]] == [made[2], made[1]]
    third = api["owner"].get(url, {"limit": 2, "cursor": second["next"]}).json()
    assert [d["id"] for d in third["items"]] == [made[0]] and third["next"] is None
    everything = api["owner"].get(url).json()
    assert len(everything["items"]) == 5 and everything["next"] is None

    for params, field in [({"cursor": "garbage"}, "cursor"), ({"limit": 0}, "limit"), ({"limit": 101}, "limit"),
                          ({"limit": "many"}, "limit")]:  # fmt: skip
        answer = api["owner"].get(url, params)
        assert answer.status_code == 422 and field in answer.json()["errors"], (params, answer.content)
