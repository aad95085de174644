"""Issue 38's "done when", in one story: an admin who must use two factors (HUB_ADMIN_2FA) makes a kids' group
limited to one image model; a kid sees only that model and is refused a video by name; a token bound to a device
can't queue elsewhere and an expiring one stops; the admin, signed in with password and code, reads each of these
changes in the audit log (the page and GET /api/audit). Each part has its own tests besides; this one checks they
hold together."""

from __future__ import annotations

import json

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from conftest import PASSWORD
from hub.accounts.tests.test_two_factor import _code, _enrol
from hub.accounts.tokens import token_create
from jobs.quotas import groups
from jobs.tests.ui_fixtures import IMAGE, VIDEO, another_tiiny

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_otp_delay(settings):
    settings.OTP_TOTP_THROTTLE_FACTOR = 0


def _signed_in_with_code(user, device) -> Client:
    client = Client()
    answer = client.post("/accounts/login/", {"username": user.username, "password": PASSWORD})
    assert answer.status_code == 302 and answer["Location"] == "/accounts/2fa/code/"
    assert client.post("/accounts/2fa/code/", {"code": _code(device, ahead=1)}).status_code == 302
    return client


def test_a_kids_group_a_bound_and_an_expiring_token_and_the_admins_audit(
    settings, admin_user, member, device
):
    other_device = another_tiiny("Office")
    settings.HUB_ADMIN_2FA = True
    otp, _codes = _enrol(admin_user)
    admin = _signed_in_with_code(admin_user, otp)

    kids = groups.group_save(by=admin_user, name="kids", models=[IMAGE], kinds=["image"])
    groups.member_add(by=admin_user, group=kids, user=member)

    kid = Client()
    kid.force_login(member)
    page = kid.get(f"/jobs/new/?device={device.pk}&kind=image").content.decode()
    assert IMAGE.split("/")[-1] in page and VIDEO.split("/")[-1] not in page
    _, raw = token_create(user=member, name="kid's script", scopes=["read", "submit"])
    refused = Client(headers={"Authorization": f"Bearer {raw}"}).post(
        "/api/jobs",
        json.dumps({"device": device.pk, "kind": "video", "model": VIDEO, "prompt": "a red fox"}),
        content_type="application/json",
    )
    assert refused.status_code == 422 and "Your group may not use" in json.dumps(refused.json())

    _, bound = token_create(
        user=admin_user, name="office only", scopes=["read", "submit"], devices=[other_device.name]
    )
    elsewhere = Client(headers={"Authorization": f"Bearer {bound}"}).post(
        "/api/jobs",
        json.dumps({"device": device.pk, "kind": "image", "model": IMAGE, "prompt": "a red fox"}),
        content_type="application/json",
    )
    assert elsewhere.status_code == 422 and other_device.name in json.dumps(elsewhere.json())

    _, brief = token_create(
        user=admin_user,
        name="an hour",
        scopes=["read"],
        expires_at=timezone.now() + timezone.timedelta(hours=1),
    )
    reader = Client(headers={"Authorization": f"Bearer {brief}"})
    assert reader.get("/api/jobs").status_code == 200
    with time_machine.travel(timezone.now() + timezone.timedelta(hours=2)):
        stopped = reader.get("/api/jobs")
    assert stopped.status_code == 401 and "expired" in stopped.content.decode()

    audit_page = admin.get("/accounts/audit/")
    assert audit_page.status_code == 200
    html = audit_page.content.decode()
    for said in ("kids", member.username, "office only", "an hour"):
        assert said in html, said
    _, reading = token_create(user=admin_user, name="auditor", scopes=["read"])
    entries = Client(headers={"Authorization": f"Bearer {reading}"}).get("/api/audit").json()["items"]
    actions = {e["action"] for e in entries}
    assert {"group-saved", "group-member-added", "token-created"} <= actions
    assert kid.get("/accounts/audit/").status_code == 403  # only admins read it
