from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from hub.accounts.invitations import DEFAULT_DAYS, MAX_DAYS, invitation_create, invitation_url
from hub.accounts.models import User


class Command(BaseCommand):
    help = (
        "Create a single-use invitation link and print it once. The invitee picks a username and password. "
        "The last line of the output is the link alone, so scripts can take it with `| tail -n 1`."
    )

    def add_arguments(self, parser):
        parser.add_argument("--role", choices=User.Role.values, default=User.Role.MEMBER)
        parser.add_argument(
            "--expires-days",
            type=int,
            default=DEFAULT_DAYS,
            help=f"how long the link works, 1 to {MAX_DAYS} days (default {DEFAULT_DAYS})",
        )
        parser.add_argument("--note", default="", help="who it is for, shown in the People page's list")

    def handle(self, *args, role: str, expires_days: int, note: str, **options):
        try:
            invitation, raw = invitation_create(
                role=role, created_by=None, expires_days=expires_days, note=note
            )
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        until = timezone.localtime(invitation.expires_at).strftime("%Y-%m-%d %H:%M %Z")
        self.stdout.write(
            f"invitation for a new {role}, single use, until {until}; it is shown once (the hub keeps a hash):"
        )
        if not settings.HUB_PUBLIC_URL:
            self.stderr.write(
                "note: HUB_PUBLIC_URL is not set, so the link uses the address the hub serves on; set it to "
                "the address people open (e.g. http://192.168.1.20:8000) if that one won't work for them."
            )
        self.stdout.write(invitation_url(raw))
