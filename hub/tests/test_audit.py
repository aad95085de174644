"""The audit log: one entry for each admin action and security event, with who, when, from where and what (never a
secret); the Audit page and ``GET /api/audit`` for admins only; entries kept ``HUB_AUDIT_DAYS``."""

from __future__ import annotations

import datetime as dt
import html
import json

import pytest
from django.test import Client
from django.utils import timezone

from hub.accounts import audit
from hub.accounts.models import AuditEntry, User
from hub.accounts.tokens import token_create, token_revoke
from hub.tasks import audit_prune
from hub.tests.test_signin_throttle import fail_until_locked, sign_in
from jobs.tests.ui_fixtures import another_tiiny, make_job

pytestmark = pytest.mark.django_db
PAGE = "/accounts/audit/"
ADMIN_IP = "10.0.0.7"


def entries(action: str) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action=action).order_by("pk"))


def only(action: str) -> AuditEntry:
    [entry] = entries(action)
    return entry


@pytest.fixture
def admin(admin_user) -> Client:
    client = Client(REMOTE_ADDR=ADMIN_IP)
    client.force_login(admin_user)
    return client


def everything_said(entry: AuditEntry) -> str:
    return json.dumps([entry.detail, entry.data, entry.target_name])


# -- people ---------------------------------------------------------------------------------------------------------


def test_people_added_role_changed_deactivated_and_brought_back(admin, admin_user, member):
    assert admin.post("/accounts/people/add/", {"username": "nia", "role": "member"}).status_code in (
        200,
        201,
    )
    nia = User.objects.get(username="nia")
    added = [e for e in entries("person-created") if e.target == nia][0]
    assert (added.actor, added.ip, added.data) == (admin_user, ADMIN_IP, {"role": "member"})
    assert "password" not in everything_said(added)

    assert admin.post(f"/accounts/people/{member.pk}/role/", {"role": "viewer"}).status_code == 302
    role = only("person-role")
    assert (role.actor_name, role.target, role.data) == ("ada", member, {"from": "member", "to": "viewer"})
    assert role.detail == "member → viewer"

    admin.post(f"/accounts/people/{member.pk}/active/", {"active": "0"})
    admin.post(f"/accounts/people/{member.pk}/active/", {"active": "1"})
    assert only("person-deactivated").target == member and only("person-reactivated").target == member


def test_a_one_time_password_is_recorded_without_the_password(admin, member):
    response = admin.post(f"/accounts/people/{member.pk}/password/")
    assert response.status_code == 200
    entry = only("person-password")
    assert entry.target == member and entry.actor_name == "ada"
    assert response.context["one_time_password"] not in everything_said(entry)


# -- sign-in ----------------------------------------------------------------------------------------------------------


def test_a_failed_sign_in_is_recorded_with_the_username_and_address_never_the_password(member):
    sign_in("mia", "hunter2-wrong", address="192.0.2.9")
    entry = only("signin-failed")
    assert (entry.target, entry.target_name, entry.ip, entry.actor) == (member, "mia", "192.0.2.9", None)
    assert "hunter2" not in everything_said(entry)
    sign_in("nobody-here", "x", address="192.0.2.9")
    stranger = entries("signin-failed")[-1]
    assert (stranger.target, stranger.target_name, stranger.data) == (None, "nobody-here", {"known": False})


def test_a_lockout_is_recorded_once_per_cool_off(member, settings):
    fail_until_locked("mia", settings, address="192.0.2.10")
    sign_in("mia", "still-wrong", address="192.0.2.10")  # refused while locked: axes tells it again
    entry = only("signin-lockout")
    assert (entry.target, entry.ip, entry.data) == (
        member,
        "192.0.2.10",
        {"minutes": settings.HUB_SIGNIN_COOLOFF_MIN},
    )


def test_an_unlock_names_the_admin(admin, member, settings):
    fail_until_locked("mia", settings, address="192.0.2.11")
    admin.post(f"/accounts/people/{member.pk}/unlock/")
    entry = only("signin-unlock")
    assert (entry.actor_name, entry.target, entry.ip) == ("ada", member, ADMIN_IP)


# -- tokens -----------------------------------------------------------------------------------------------------------


def test_tokens_made_and_revoked_are_recorded_never_their_value(admin, admin_user, member, member_client):
    response = member_client.post(
        "/accounts/tokens/new/", {"name": "laptop", "scopes": ["read"], "expires": "7d"}
    )
    raw = response.context["raw_token"]
    made = only("token-created")
    assert (made.actor, made.target, made.data["name"], made.data["scopes"]) == (
        member,
        member,
        "laptop",
        ["read"],
    )
    assert (
        made.data["expires_at"] and raw not in everything_said(made) and raw[5:] not in everything_said(made)
    )
    token = member.api_tokens.get()
    admin.post(f"/accounts/tokens/{token.pk}/revoke/")
    revoked = only("token-revoked")
    assert (revoked.actor, revoked.target, revoked.ip) == (admin_user, member, ADMIN_IP)
    token_revoke(token=token, by=admin_user)  # again: nothing new happened, nothing new recorded
    assert len(entries("token-revoked")) == 1


def test_record_drops_secrets_whatever_the_caller_passes(member):
    _, raw = token_create(user=member, name="t", scopes=["read"])
    entry = audit.record(
        audit.Action.DEVICE_CHANGED,
        actor=member,
        detail=f"oops {raw}",
        data={"api_key": "k-123", "password": "p", "nested": {"secret": "s", "ok": raw}, "fields": ["name"]},
    )
    said = everything_said(entry)
    assert raw not in said and "k-123" not in said and '"p"' not in said and '"s"' not in said
    assert entry.data == {"nested": {"ok": "thub_…"}, "fields": ["name"]}


def test_an_unknown_action_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown audit action"):
        audit.record("made-up")


# -- devices, quotas, backups, share links -----------------------------------------------------------------------------


def test_devices_added_and_changed_on_the_pages(admin, admin_user):
    body = {"name": "Pocket", "kind": "tiiny", "base_url": "http://127.0.0.1:9", "api_key": "k-secret-1",
            "night_start": "23:00", "night_end": "07:00"}  # fmt: skip
    response = admin.post("/devices/add/", body)
    assert response.status_code == 302, response.content[:2000]
    added = only("device-added")
    assert (added.actor, added.target_kind, added.target_name, added.ip) == (
        admin_user,
        "device",
        "Pocket",
        ADMIN_IP,
    )
    assert "k-secret-1" not in everything_said(added)
    device_id = int(added.target_ref)
    admin.post(f"/devices/{device_id}/edit/", {**body, "name": "Pocket 2"})
    changed = only("device-changed")
    assert changed.target_name == "Pocket 2" and "name" in changed.data["fields"]


def test_a_device_removed_on_the_admin_site_is_recorded(admin, admin_user):
    device = another_tiiny("Attic")
    response = admin.post(f"/admin/devices/device/{device.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    removed = only("device-removed")
    assert (removed.actor, removed.target_name, removed.target_ref) == (admin_user, "Attic", str(device.pk))


def test_quotas_changed_are_recorded(admin_user, member):
    from jobs.quotas.services import quota_set

    quota_set(by=admin_user, device_minutes_per_day=30)
    quota_set(by=admin_user, user=member, max_queued=2)
    household, person = entries("quota-changed")
    assert (household.target_name, household.data) == ("the household", {"device_minutes_per_day": 30})
    assert (person.target, person.data, person.actor) == (member, {"max_queued": 2}, admin_user)


def test_a_share_link_made_is_recorded_once(member):
    from jobs.queue.services import job_share_link

    device = another_tiiny("Home")
    job = make_job(member, device, state="done")
    job_share_link(job=job, by=member, enable=True)
    job_share_link(job=job, by=member, enable=True)  # already there: nothing new
    entry = only("share-created")
    assert (entry.actor, entry.target_kind, entry.target_ref) == (member, "job", str(job.pk))
    job.refresh_from_db()
    assert job.share_token not in everything_said(entry)


# -- the page and the API ----------------------------------------------------------------------------------------------


def test_the_page_filters_by_who_what_and_when(admin, admin_user, member):
    token_create(user=member, name="mine", scopes=["read"])
    token_create(user=admin_user, name="admins", scopes=["read"])
    AuditEntry.objects.filter(target_name="mia").update(at=timezone.now() - dt.timedelta(days=10))
    page = html.unescape(admin.get(PAGE).content.decode())
    assert "Token created" in page and "“mine”" in page and "“admins”" in page
    by_mia = html.unescape(admin.get(PAGE, {"actor": "MIA"}).content.decode())
    assert "“mine”" in by_mia and "“admins”" not in by_mia
    recent = html.unescape(admin.get(PAGE, {"since": timezone.localdate().isoformat()}).content.decode())
    assert "“admins”" in recent and "“mine”" not in recent
    assert 'data-action="person-created"' not in admin.get(PAGE, {"action": "token-created"}).content.decode()
    bad = admin.get(PAGE, {"since": "yesterday"})
    assert bad.status_code == 400 and "Enter a date" in html.unescape(bad.content.decode())


def test_the_page_pages_with_an_older_link(admin, admin_user, monkeypatch):
    monkeypatch.setattr(audit, "PAGE_SIZE", 2)
    for n in range(5):
        audit.record(audit.Action.QUOTA_CHANGED, actor=admin_user, target_name=f"q{n}")
    pages, url = [], PAGE + "?action=quota-changed"
    while url:
        response = admin.get(url)
        text = response.content.decode()
        pages.append(sorted((n for n in range(5) if f"q{n}<" in text), key=lambda n: text.index(f"q{n}<")))
        older = response.context["next_query"]
        url = f"{PAGE}?{older}" if older else ""
    assert pages == [[4, 3], [2, 1], [0]]


def test_the_api_lists_entries_in_cursor_pages_for_admins(admin_user, member):
    for n in range(3):
        audit.record(audit.Action.QUOTA_CHANGED, actor=admin_user, target_name=f"q{n}", data={"n": n})
    _, raw = token_create(user=admin_user, name="audit reader", scopes=["read"])
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    first = client.get("/api/audit", {"limit": 2, "action": "quota-changed"}).json()
    assert [e["target_name"] for e in first["items"]] == ["q2", "q1"]
    assert first["items"][0]["actor"] == "ada" and first["items"][0]["data"] == {"n": 2}
    second = client.get("/api/audit", {"limit": 2, "action": "quota-changed", "cursor": first["next"]}).json()
    assert [e["target_name"] for e in second["items"]] == ["q0"] and second["next"] is None
    assert client.get("/api/audit", {"cursor": "nonsense"}).status_code == 422
    assert client.get("/api/audit", {"action": "nope"}).json()["errors"]["action"]
    assert client.get("/api/audit", {"actor": "ada"}).status_code == 200


def test_members_and_viewers_may_not_read_the_audit(member, member_client, viewer):
    assert member_client.get(PAGE).status_code == 403
    _, raw = token_create(user=member, name="t", scopes=["read"])
    response = Client(HTTP_AUTHORIZATION=f"Bearer {raw}").get("/api/audit")
    assert response.status_code == 403 and "Only admins" in response.json()["detail"]
    assert member_client.get("/api/audit").status_code == 403
    viewer_client = Client()
    viewer_client.force_login(viewer)
    assert viewer_client.get(PAGE).status_code == 403 and viewer_client.get("/api/audit").status_code == 403
    assert Client().get("/api/audit").status_code == 401
    assert Client().get(PAGE).status_code == 302  # to the sign-in page


# -- retention ---------------------------------------------------------------------------------------------------------


def test_entries_older_than_hub_audit_days_are_pruned_daily(settings, admin_user):
    settings.HUB_AUDIT_DAYS = 30
    old = audit.record(audit.Action.QUOTA_CHANGED, actor=admin_user, target_name="old")
    kept = audit.record(audit.Action.QUOTA_CHANGED, actor=admin_user, target_name="kept")
    AuditEntry.objects.filter(pk=old.pk).update(at=timezone.now() - dt.timedelta(days=31))
    AuditEntry.objects.filter(pk=kept.pk).update(at=timezone.now() - dt.timedelta(days=29))
    assert audit_prune() == 1
    assert (
        not AuditEntry.objects.filter(pk=old.pk).exists() and AuditEntry.objects.filter(pk=kept.pk).exists()
    )


def test_the_prune_runs_from_beat_once_a_day():
    from hub.celery import app

    entry = app.conf.beat_schedule["hub-audit-prune"]
    assert entry["task"] == "hub.tasks.audit_prune" and entry["schedule"] == 86400.0
