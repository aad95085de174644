"""Groups: what a person may use, from the groups they are in (``UserGroup``). The one rule every door asks.

The stricter wins. A group that lists models (kinds, devices) allows only those; a group whose list is empty
limits nothing there. A person in several groups may use a model only if *every* group that limits models allows
it (the lists intersect); the same for kinds and devices. Someone in no group, or only in groups that limit
nothing, may use everything. Quotas follow the same rule in ``jobs.quotas.services``: a member's limit is the
smallest of their own (or the household's) and each of their groups' per-person defaults, and each group's shared
limit counts its members together.

The hub's base knows no device: models are ids as the devices report them, devices their ids. The jobs app
applies the rule (``jobs.queue.admission``: a request outside it is refused by name; the listings offer only what
is allowed) and checks an admin's lists against what the devices report (``jobs.groups``).

    allowance_for(user) -> Allowance     what the person may use (cached on the user object for a request)
    combine(limits)     -> Allowance     the rule itself, for any groups' lists (pure)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hub.accounts.models import UserGroup


def short_name(model_id: str) -> str:
    """A model's name after its publisher, folded: "MiniMaxAI/MiniMax-H3-Turbo" -> "minimax-h3-turbo"."""
    return str(model_id).replace("\\", "/").rsplit("/", 1)[-1].casefold()


def same_model(a: str, b: str) -> bool:
    """The same model on any device: the same id, or the same name after the publisher (as ``resolve_model``)."""
    return a == b or short_name(a) == short_name(b)


@dataclass(frozen=True)
class GroupLists:
    """One group's lists (empty: no limit there)."""

    models: frozenset[str] = frozenset()
    kinds: frozenset[str] = frozenset()
    devices: frozenset[int] = frozenset()

    @classmethod
    def of(cls, group: UserGroup) -> GroupLists:
        return cls(
            models=frozenset(str(m) for m in group.model_ids or []),
            kinds=frozenset(str(k) for k in group.kinds or []),
            devices=frozenset(int(d) for d in group.devices or []),
        )


@dataclass(frozen=True)
class Allowance:
    """What a person may use. ``models``: one set per group that limits models (a model must be in each);
    ``kinds``, ``devices``: the intersection of the limiting groups' lists; None: no limit."""

    models: tuple[frozenset[str], ...] = ()
    kinds: frozenset[str] | None = None
    devices: frozenset[int] | None = None

    @property
    def limited(self) -> bool:
        return bool(self.models) or self.kinds is not None or self.devices is not None

    def model_ok(self, model_id: str) -> bool:
        return all(any(same_model(model_id, m) for m in allowed) for allowed in self.models)

    def kind_ok(self, kind: str) -> bool:
        return self.kinds is None or str(kind) in self.kinds

    def device_ok(self, device_id: int | None) -> bool:
        return self.devices is None or device_id in self.devices


NO_LIMIT = Allowance()


def combine(limits: Iterable[GroupLists]) -> Allowance:
    """The stricter wins: models in every limiting group's list, kinds and devices in all limiting lists."""
    models: list[frozenset[str]] = []
    kinds: frozenset[str] | None = None
    devices: frozenset[int] | None = None
    for each in limits:
        if each.models:
            models.append(each.models)
        if each.kinds:
            kinds = each.kinds if kinds is None else kinds & each.kinds
        if each.devices:
            devices = each.devices if devices is None else devices & each.devices
    return Allowance(models=tuple(models), kinds=kinds, devices=devices)


def allowance_for(user: Any) -> Allowance:
    """What ``user`` may use (one read, kept on the user object: a page asks for every device and kind)."""
    if not getattr(user, "pk", None):
        return NO_LIMIT
    cached = getattr(user, "_hub_allowance", None)
    if cached is not None:
        return cached
    allowance = combine(GroupLists.of(g) for g in UserGroup.objects.filter(members=user.pk))
    try:
        user._hub_allowance = allowance
    except AttributeError:  # (not an object that takes attributes)
        pass
    return allowance


def forget_allowance(user: Any) -> None:
    """Drop what ``allowance_for`` kept on this user object (after their groups changed)."""
    if hasattr(user, "_hub_allowance"):
        del user._hub_allowance


def refusal_word(model_id: str) -> str:
    """How a refusal names a model: its name after the publisher, as typed on the devices."""
    return str(model_id).replace("\\", "/").rsplit("/", 1)[-1]


__all__ = [
    "NO_LIMIT",
    "Allowance",
    "GroupLists",
    "allowance_for",
    "combine",
    "forget_allowance",
    "refusal_word",
    "same_model",
    "short_name",
]
