"""Groups in the audit log (issue 38): made, changed, deleted, people put in and taken out, with who did it."""

from __future__ import annotations

import pytest

from hub.accounts.models import AuditEntry
from jobs.quotas import groups

pytestmark = pytest.mark.django_db


def test_every_change_to_a_group_is_in_the_audit_log(admin_user, member):
    kids = groups.group_save(by=admin_user, name="kids", kinds=["image"])
    groups.group_save(by=admin_user, group=kids, name="kids", kinds=["image", "speech"])
    groups.member_add(by=admin_user, group=kids, user=member)
    groups.member_remove(by=admin_user, group=kids, user=member)
    groups.group_delete(by=admin_user, group=kids)
    rows = list(AuditEntry.objects.filter(actor=admin_user).order_by("at", "pk"))
    assert [(r.action, r.target_name, r.detail) for r in rows if r.action.startswith("group")] == [
        ("group-saved", "kids", "made"),
        ("group-saved", "kids", "changed"),
        ("group-member-added", member.username, ""),
        ("group-member-removed", member.username, ""),
        ("group-deleted", "kids", ""),
    ]
    assert rows[-1].target_kind == "usergroup"
    assert next(r for r in rows if r.action == "group-member-added").data == {"group": "kids"}
