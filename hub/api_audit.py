"""``GET /api/audit``: the audit log for admins (``hub.accounts.audit``), newest first, in cursor pages.

Someone who is not an admin gets 403, as on every admin-only route; a token needs the ``read`` scope.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest
from ninja import Query, Router, Schema

from hub.accounts import audit
from hub.accounts.models import ApiToken, AuditEntry
from hub.api_auth import require_scope
from hub.api_errors import ErrorOut

router = Router(tags=["audit"])
ERRORS = {401: ErrorOut, 403: ErrorOut, 422: ErrorOut}


class AuditEntryOut(Schema):
    id: int
    at: dt.datetime
    action: str
    action_label: str
    actor: str | None  # the username then; None: the hub itself or the command line
    ip: str | None
    target_kind: str  # "person", "device", "apitoken"…, "" for none
    target_ref: str  # its id, "" for none
    target_name: str
    detail: str
    data: dict[str, Any]


class AuditPageOut(Schema):
    items: list[AuditEntryOut]
    next: str | None


def entry_out(entry: AuditEntry) -> dict[str, Any]:
    return {
        "id": entry.pk,
        "at": entry.at,
        "action": entry.action,
        "action_label": entry.get_action_display(),
        "actor": entry.actor_name or None,
        "ip": entry.ip,
        "target_kind": entry.target_kind,
        "target_ref": entry.target_ref,
        "target_name": entry.target_name,
        "detail": entry.detail,
        "data": entry.data or {},
    }


_SINCE = Query(None, description="From this day on (in your time zone), e.g. 2027-01-31.")
_UNTIL = Query(None, description="Up to and including this day.")


@router.get(
    "", url_name="audit_list", response={200: AuditPageOut, **ERRORS}, summary="The audit log (admins)"
)
def audit_list(
    request: HttpRequest,
    actor: str | None = Query(None, max_length=150, description="A username: what they did."),
    action: str | None = Query(None, max_length=32, description="One action, e.g. `token-revoked`."),
    since: dt.date | None = _SINCE,
    until: dt.date | None = _UNTIL,
    cursor: str | None = Query(None, description="The `next` of the previous page."),
    limit: int = Query(50, ge=1, le=200),
):
    """Admin actions and security events, newest first: who, when, from where, what. Admins only (403)."""
    require_scope(request, ApiToken.Scope.READ)
    if not request.user.is_admin:
        raise PermissionDenied("Only admins may read the audit log.")
    if action and action not in audit.Action.values:
        raise ValidationError({"action": [f"Unknown action; use one of: {', '.join(audit.Action.values)}."]})
    if since and until and since > until:
        raise ValidationError({"since": ["“since” is after “until”."]})
    qs = audit.entries(actor=actor, action=action, since=since, until=until)
    try:
        rows, after = audit.page(qs, cursor=cursor, limit=limit)
    except audit.BadCursor as exc:
        raise ValidationError({"cursor": [str(exc)]}) from None
    return {"items": [entry_out(e) for e in rows], "next": after}
