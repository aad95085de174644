from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from hub.accounts.models import User
from hub.accounts.tokens import token_create


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

    def handle(self, *args, username: str, name: str, scope: str, **options):
        user = User.objects.filter(username=username.strip()).first()
        if user is None:
            raise CommandError(f"no such person: {username!r} (create them with create_user)")
        try:
            token, raw = token_create(user=user, name=name, scopes=scope.split(","))
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        self.stdout.write(
            f"created token “{token.name}” for {user.username} (may {' and '.join(token.scope_list)}); "
            "it is shown once, the hub keeps only its hash:"
        )
        self.stdout.write(raw)
