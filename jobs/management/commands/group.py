"""``python manage.py group create|change|add|remove|list|delete …``: groups of people and what they may use.

    group create kids --models Z-Image-Turbo --kinds image --devices Pocket --shared-minutes-per-day 60
    group add kids mia
    group remove kids mia
    group list
    group delete kids

The rules are ``jobs.quotas.groups``' (lists checked against what the devices report) and
``hub.accounts.groups``' (the stricter wins); this is one more way in, as the Groups page.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from hub.accounts.models import UserGroup
from jobs.quotas import groups

LIMITS = {
    "device_minutes_per_day": "--minutes-per-day",
    "device_minutes_per_week": "--minutes-per-week",
    "max_queued": "--max-queued",
    "storage_mb": "--storage-mb",
    "shared_minutes_per_day": "--shared-minutes-per-day",
    "shared_minutes_per_week": "--shared-minutes-per-week",
}


def _list(raw: str | None) -> list[str]:
    return [part for part in (raw or "").split(",") if part.strip()]


def _limit(flag: str, raw: str) -> int | None:
    text = raw.strip().lower()
    if text in ("", "none"):
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 9:
        raise CommandError(f"{flag}: give a whole number of 0 or more, or 'none' (not {raw[:20]!r}).")
    return int(text)


def _lists(options: dict[str, Any], group: UserGroup | None) -> dict[str, list[Any]]:
    """The lists given (an empty one: no limit), the group's own for those left out."""
    own = {"models": group.model_ids, "kinds": group.kinds, "devices": group.devices} if group else {}
    return {
        name: _list(options[name]) if options[name] is not None else list(own.get(name) or [])
        for name in ("models", "kinds", "devices")
    }


class Command(BaseCommand):
    help = (
        "Groups of people and what they may use. create NAME [--models ID,…] [--kinds KIND,…] "
        "[--devices NAME,…] [limits]; change NAME (the same options; only those given change); add NAME USER; "
        "remove NAME USER; list; delete NAME. An empty list limits nothing; a member's limits are the stricter "
        "of their own and their groups'."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("action", choices=["create", "change", "add", "remove", "list", "delete"])
        parser.add_argument("name", nargs="?", help="the group")
        parser.add_argument("user", nargs="?", help="a person's sign-in name (add, remove)")
        parser.add_argument(
            "--models", help="model ids or names, comma-separated (as the devices report them)"
        )
        parser.add_argument(
            "--kinds", help="job kinds, comma-separated: " + ", ".join(v for v, _ in groups.kind_choices())
        )
        parser.add_argument("--devices", help="device names, comma-separated")
        parser.add_argument("--rename", help="change: the group's new name")
        for name, flag in LIMITS.items():
            parser.add_argument(flag, dest=name, metavar="N|none")

    def handle(self, *args: Any, **options: Any) -> None:
        action, name = options["action"], options["name"]
        if action == "list":
            return self._list()
        if not name:
            raise CommandError(f"group {action} needs the group's NAME.")
        try:
            if action in ("create", "change"):
                return self._save(action, name, options)
            group = self._group(name)
            if action == "delete":
                groups.group_delete(by=None, group=group)
                self.stdout.write(f"Deleted the group {group.name}.")
                return None
            if not options["user"]:
                raise CommandError(f"group {action} needs a USER.")
            user = groups.find_user(options["user"])
            if action == "add":
                done = groups.member_add(by=None, group=group, user=user)
                self.stdout.write(f"{user.username} is {'now' if done else 'already'} in {group.name}.")
            else:
                done = groups.member_remove(by=None, group=group, user=user)
                self.stdout.write(f"{user.username} is {'no longer' if done else 'not'} in {group.name}.")
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        return None

    def _group(self, name: str) -> UserGroup:
        group = UserGroup.objects.filter(name__iexact=name.strip()).first()
        if group is None:
            known = ", ".join(UserGroup.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"No group {name!r}. Groups: {known}.")
        return group

    def _save(self, action: str, name: str, options: dict[str, Any]) -> None:
        group = self._group(name) if action == "change" else None
        if group is None and UserGroup.objects.filter(name__iexact=name.strip()).exists():
            raise CommandError(f"There is already a group called {name!r} (change it with `group change`).")
        limits = {f: _limit(flag, options[f]) for f, flag in LIMITS.items() if options.get(f) is not None}
        lists = _lists(options, group)
        saved = groups.group_save(
            by=None,
            group=group,
            name=options.get("rename") or (group.name if group else name),
            **lists,
            **limits,
        )
        self.stdout.write(f"{'Created' if group is None else 'Changed'} the group {saved.name}.")
        self._print(next(r for r in groups.group_rows() if r.group.pk == saved.pk))

    def _list(self) -> None:
        rows = groups.group_rows()
        if not rows:
            self.stdout.write("No groups yet (create one: manage.py group create NAME).")
        for row in rows:
            self._print(row)

    def _print(self, row: groups.GroupRow) -> None:
        g = row.group
        self.stdout.write(f"{g.name}: {', '.join(u.username for u in row.members) or 'no members'}")
        self.stdout.write(f"  models:  {', '.join(row.models) or 'any'}")
        self.stdout.write(f"  kinds:   {', '.join(row.kinds) or 'any'}")
        self.stdout.write(f"  devices: {', '.join(row.devices) or 'any'}")
        limits = [
            f"{flag.lstrip('-')} {getattr(g, f)}" for f, flag in LIMITS.items() if getattr(g, f) is not None
        ]
        self.stdout.write(f"  limits:  {', '.join(limits) or 'none'}")
