"""Groups, as admins make them: their lists checked against what the devices report, their members, their limits.

The rule (what a group's members may use, the stricter wins) is ``hub.accounts.groups``; admission applies it
(``jobs.queue.admission.group_refusal``) and the listings ask ``jobs.queue.submission.usable_*``. This module is
the writing side: the Groups page (``jobs.doors.group_views``) and ``manage.py group`` are its two ways in.

Why the row lives in ``hub.accounts`` and its checks here: a group is about people, and the hub's base knows no
device, so ``UserGroup`` keeps plain model ids, kind values and device ids; what those may be (the models the
devices report, the kinds the hub runs, the devices it has) is known from ``jobs`` and ``devices``, above it.

Services: ``group_save``, ``member_add``, ``member_remove``, ``group_delete`` (admins, or the command line:
``by=None``). Selectors: ``model_choices``, ``kind_choices``, ``device_choices``, ``resolve_models``,
``resolve_kinds``, ``resolve_devices``, ``group_rows``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from devices.capabilities import Capabilities
from devices.models import Device
from devices.selectors import model_label
from hub.accounts import audit
from hub.accounts.groups import forget_allowance, same_model, short_name
from hub.accounts.models import UserGroup
from jobs.models import JobKind

logger = logging.getLogger("jobs.quotas.groups")

#: The group's quota fields: per-person defaults, then the shared limits (its members together).
PERSON_FIELDS = ("device_minutes_per_day", "device_minutes_per_week", "max_queued", "storage_mb")
SHARED_FIELDS = ("shared_minutes_per_day", "shared_minutes_per_week")
MAX_NAME = 50


def _require_admin(by: Any | None) -> None:
    if by is not None and not getattr(by, "is_admin", False):
        raise PermissionDenied("Only admins can manage groups.")


# -- what may be chosen: built from what the devices report ----------------------------------------------------


def model_choices() -> list[tuple[str, str]]:
    """Every model some device reports, once (by id), with its readable name and kind, by name."""
    seen: dict[str, str] = {}
    for caps in Device.objects.order_by("name").values_list("capabilities", flat=True):
        for m in Capabilities.from_dict(caps).models:
            seen.setdefault(m.id, f"{model_label(m.id)} ({m.kind})" if m.kind else model_label(m.id))
    return sorted(seen.items(), key=lambda pair: pair[1].casefold())


def kind_choices() -> list[tuple[str, str]]:
    return [(str(v), str(label)) for v, label in JobKind.choices]


def device_choices() -> list[tuple[int, str]]:
    return list(Device.objects.order_by("name").values_list("pk", "name"))


def resolve_models(names: Iterable[str]) -> list[str]:
    """Model ids for what an admin typed: an id some device reports, or its name after the publisher (any case).
    ``ValidationError`` naming the unknown ones."""
    known = [m for m, _label in model_choices()]
    out, unknown = [], []
    for raw in _cleaned(names):
        found = next((m for m in known if m == raw), None) or next(
            (m for m in known if short_name(m) == short_name(raw)), None
        )
        if found is None:
            unknown.append(raw)
        elif not any(same_model(found, m) for m in out):
            out.append(found)
    if unknown:
        offered = ", ".join(model_label(m) for m in known) or "none (no device reports a model yet)"
        raise ValidationError(f"No device has the model {', '.join(unknown)}. Models: {offered}.")
    return out


def resolve_kinds(names: Iterable[str]) -> list[str]:
    values = {str(v): str(v) for v in JobKind.values} | {
        str(label).casefold(): str(v) for v, label in JobKind.choices
    }
    out, unknown = [], []
    for raw in _cleaned(names):
        kind = values.get(raw) or values.get(raw.casefold())
        if kind is None:
            unknown.append(raw)
        elif kind not in out:
            out.append(kind)
    if unknown:
        raise ValidationError(f"Unknown kind {', '.join(unknown)}. Kinds: {', '.join(JobKind.values)}.")
    return out


def resolve_devices(names: Iterable[str | int]) -> list[int]:
    """Device ids for names (any case) or ids; ``ValidationError`` naming the unknown ones."""
    devices = device_choices()
    out, unknown = [], []
    for raw in _cleaned(names):
        found = next(
            (pk for pk, name in devices if str(pk) == raw or name.casefold() == raw.casefold()), None
        )
        if found is None:
            unknown.append(raw)
        elif found not in out:
            out.append(found)
    if unknown:
        offered = ", ".join(name for _pk, name in devices) or "none yet"
        raise ValidationError(f"No device {', '.join(unknown)}. Devices: {offered}.")
    return out


def _cleaned(names: Iterable[Any]) -> list[str]:
    return [str(n).strip() for n in names if str(n).strip()]


# -- services ----------------------------------------------------------------------------------------------------


def _check_name(name: str, *, group: UserGroup | None) -> str:
    name = " ".join(str(name or "").split())
    if not name:
        raise ValidationError({"name": "Give the group a name."})
    if len(name) > MAX_NAME:
        raise ValidationError({"name": f"A group's name has at most {MAX_NAME} characters."})
    taken = UserGroup.objects.filter(name__iexact=name).exclude(pk=getattr(group, "pk", None))
    if taken.exists():
        raise ValidationError({"name": f"There is already a group called “{name}”."})
    return name


def _check_limits(limits: dict[str, int | None]) -> None:
    for name, value in limits.items():
        if name not in PERSON_FIELDS + SHARED_FIELDS:
            raise ValidationError(f"Unknown limit {name}.")
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise ValidationError({name: "Give a whole number of 0 or more, or leave it empty for no limit."})


def group_save(
    *,
    by: Any | None,
    group: UserGroup | None = None,
    name: str,
    models: Iterable[str] = (),
    kinds: Iterable[str] = (),
    devices: Iterable[str | int] = (),
    **limits: int | None,
) -> UserGroup:
    """Create a group (``group=None``) or change one: its name, lists (names or ids, checked against what the
    devices report: ``resolve_*``; empty: no limit there) and the limits given. ``ValidationError`` otherwise."""
    _require_admin(by)
    name = _check_name(name, group=group)
    _check_limits(limits)
    row = group or UserGroup()
    row.name = name
    row.model_ids = resolve_models(models)
    row.kinds = resolve_kinds(kinds)
    row.devices = resolve_devices(devices)
    for field, value in limits.items():
        setattr(row, field, value)
    try:
        with transaction.atomic():
            row.save()
    except IntegrityError:  # (the same name saved at once by someone else)
        raise ValidationError({"name": f"There is already a group called “{name}”."}) from None
    logger.info("group %s saved by %s", row.name, getattr(by, "username", "the command line"))
    audit.record(
        audit.Action.GROUP_SAVED,
        actor=by,
        target=row,
        target_name=row.name,
        detail="made" if group is None else "changed",
        data={"models": row.model_ids, "kinds": row.kinds, "devices": row.devices, **limits},
    )
    return row


def member_add(*, by: Any | None, group: UserGroup, user: Any) -> bool:
    """Put ``user`` in ``group``; False when they were in it already."""
    _require_admin(by)
    if group.members.filter(pk=user.pk).exists():
        return False
    group.members.add(user)
    forget_allowance(user)  # (what this user object knew of their groups is stale now)
    audit.record(audit.Action.GROUP_MEMBER_ADDED, actor=by, target=user, data={"group": group.name})
    return True


def member_remove(*, by: Any | None, group: UserGroup, user: Any) -> bool:
    _require_admin(by)
    if not group.members.filter(pk=user.pk).exists():
        return False
    group.members.remove(user)
    forget_allowance(user)
    audit.record(audit.Action.GROUP_MEMBER_REMOVED, actor=by, target=user, data={"group": group.name})
    return True


def group_delete(*, by: Any | None, group: UserGroup) -> None:
    """Delete the group: its members use what their other groups (or the household) allow; their jobs stay."""
    _require_admin(by)
    audit.record(audit.Action.GROUP_DELETED, actor=by, target=group, target_name=group.name)
    group.delete()


def find_user(username: str) -> Any:
    user = get_user_model().objects.filter(username=str(username).strip()).first()
    if user is None:
        raise ValidationError(f"No one is called {str(username)[:40]!r}.")
    return user


# -- the Groups page's rows --------------------------------------------------------------------------------------


@dataclass
class GroupRow:
    group: UserGroup
    members: list[Any]
    models: list[str]
    kinds: list[str]
    devices: list[str]


def group_rows() -> list[GroupRow]:
    """Every group with its members and its lists in words (a device removed since is left out)."""
    names = dict(device_choices())
    labels = dict(kind_choices())
    rows = []
    for group in UserGroup.objects.prefetch_related("members").order_by("name"):
        rows.append(
            GroupRow(
                group=group,
                members=sorted(group.members.all(), key=lambda u: u.username),
                models=[model_label(m) for m in group.model_ids or []],
                kinds=[labels.get(k, k) for k in group.kinds or []],
                devices=[names[d] for d in group.devices or [] if d in names],
            )
        )
    return rows


__all__ = [
    "PERSON_FIELDS",
    "SHARED_FIELDS",
    "GroupRow",
    "device_choices",
    "find_user",
    "group_delete",
    "group_rows",
    "group_save",
    "kind_choices",
    "member_add",
    "member_remove",
    "model_choices",
    "resolve_devices",
    "resolve_kinds",
    "resolve_models",
]
