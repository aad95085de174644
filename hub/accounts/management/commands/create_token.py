from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from hub.accounts.models import User
from hub.accounts.tokens import device_names, parse_expires_in, token_create


class Command(BaseCommand):
    help = (
        "Create a personal API token for USERNAME and print it once. The last line of the output is the "
        "token alone, so scripts can take it with `| tail -n 1`."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="command line", help="what will use it (default: command line)")
        parser.add_argument(
            "--scope", default="read", help="comma-separated: read, or read,submit (default: read)"
        )
        parser.add_argument(
            "--expires-in",
            default=None,
            metavar="DURATION",
            help="stop working after this long: 30s, 45m, 12h, 7d or 2w (default: never)",
        )
        parser.add_argument(
            "--device",
            action="append",
            default=[],
            metavar="NAME",
            help="its jobs run only on this device (repeat for several; default: any device)",
        )

    def handle(self, *args, username: str, name: str, scope: str, expires_in: str | None, device, **options):
        user = User.objects.filter(username=username.strip()).first()
        if user is None:
            raise CommandError(f"no such person: {username!r} (create them with create_user)")
        try:
            expires_at = timezone.now() + parse_expires_in(expires_in) if expires_in is not None else None
        except ValueError as exc:
            raise CommandError(f"--expires-in: {exc}") from None
        try:
            token, raw = token_create(
                user=user, name=name, scopes=scope.split(","), expires_at=expires_at, devices=device
            )
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        limits = []
        if token.expires_at:
            limits.append(f"until {token.expires_at:%Y-%m-%d %H:%M %Z}")
        if device:
            limits.append("only on " + ", ".join(sorted(device_names(token.device_ids).values())))
        self.stdout.write(
            f"created token “{token.name}” for {user.username} (may {' and '.join(token.scope_list)}"
            f"{'; ' + '; '.join(limits) if limits else ''}); it is shown once, the hub keeps only its hash:"
        )
        self.stdout.write(raw)
