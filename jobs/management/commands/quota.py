"""``python manage.py quota USERNAME [--device-minutes-per-day N] …``: set a person's limits, print them and
their usage. The rules are ``jobs.quotas.services``'; this is one more way in."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from jobs.models import QUOTA_FIELDS, UNLIMITED
from jobs.quotas import services as quotas

OPTIONS = {
    "device_minutes_per_day": "--device-minutes-per-day",
    "device_minutes_per_week": "--device-minutes-per-week",
    "max_queued": "--max-queued",
    "storage_mb": "--storage-mb",
}


class Command(BaseCommand):
    help = (
        "Set a person's limits (only those given) and print their limits and usage. Each value is a whole "
        "number, 'default' (back to the household default) or 'none' (no limit for this person). --clear drops "
        "all of the person's own limits first. With --household instead of a USERNAME, the values set the "
        "household defaults ('none' or 'default' there: no limit)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("username", nargs="?", help="the person (their sign-in name)")
        parser.add_argument("--household", action="store_true", help="set the household defaults instead")
        units = {"device_minutes_per_day": "minutes", "device_minutes_per_week": "minutes"}
        for name, flag in OPTIONS.items():
            parser.add_argument(
                flag,
                dest=name,
                metavar="N|default|none",
                help=f"{quotas.LABELS[name]} ({units.get(name, quotas.UNITS[name])})",
            )
        parser.add_argument(
            "--clear",
            action="store_true",
            help="drop the person's own limits: they follow the household again",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        username, household = options["username"], options["household"]
        if bool(username) == bool(household):
            raise CommandError("Name one person (USERNAME) or give --household.")
        person = None
        if username:
            person = get_user_model().objects.filter(username=username).first()
            if person is None:
                raise CommandError(f"No one is called {username!r}.")
        elif options["clear"]:
            raise CommandError("--clear is for a person's own limits; set household values with --household.")
        values: dict[str, int | None] = {}
        for name, flag in OPTIONS.items():
            raw = options.get(name)
            if raw is None:
                continue
            try:
                values[name] = quotas.parse_limit(raw, person=person is not None)
            except ValidationError as exc:
                raise CommandError(f"{flag}: {' '.join(exc.messages)}") from None
        if options["clear"]:
            quotas.quota_set(by=None, user=person, **dict.fromkeys(QUOTA_FIELDS))
        if values:
            quotas.quota_set(by=None, user=person, **values)
        if person is None:
            self._print_household()
        else:
            self._print_person(person)

    def _print_household(self) -> None:
        limits = quotas.household_limits()
        self.stdout.write("Household defaults:")
        for name in QUOTA_FIELDS:
            self.stdout.write(
                f"  {quotas.LABELS[name] + ':':<22}{quotas.describe(limits.get(name), quotas.UNITS[name])}"
            )

    def _print_person(self, person: Any) -> None:
        limits, own = quotas.limits_for(person), quotas.overrides_of(person)
        use = quotas.usage_for(person)
        booked = f" (+{use.booked_s / 60:.0f} booked by jobs in the queue)" if use.booked_s >= 30 else ""
        used = {
            "device_minutes_per_day": f"used today: {use.day_s / 60:.1f} minutes{booked}",
            "device_minutes_per_week": f"used this week: {use.week_s / 60:.1f} minutes",
            "max_queued": f"in the queue now: {use.queued}",
            "storage_mb": f"kept: {use.storage_mb:.1f} MB",
        }
        self.stdout.write(f"Limits of {person.username}:")
        for name in QUOTA_FIELDS:
            where = "default" if own[name] is None else ("own: none" if own[name] == UNLIMITED else "own")
            limit = f"{quotas.describe(limits.get(name), quotas.UNITS[name])} ({where})"
            self.stdout.write(f"  {quotas.LABELS[name] + ':':<22}{limit:<28}{used[name]}")
