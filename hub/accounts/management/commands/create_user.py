from __future__ import annotations

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from hub.accounts.models import User
from hub.accounts.services import user_create_or_update


class Command(BaseCommand):
    help = "Create or update a person (idempotent). Prints a generated password once when none is given."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", choices=User.Role.values, default=User.Role.MEMBER)
        parser.add_argument("--password", help="set this password (otherwise generated for new people)")

    def handle(self, *args, username: str, role: str, password: str | None, **options):
        if not username.strip():
            raise CommandError("username must not be empty")
        if password:
            # The same rules as every other place a password is set (AUTH_PASSWORD_VALIDATORS).
            existing = User.objects.filter(username=username.strip()).first()
            try:
                validate_password(password, user=existing or User(username=username.strip()))
            except ValidationError as exc:
                raise CommandError("password refused: " + " ".join(exc.messages)) from None
        result = user_create_or_update(username=username.strip(), role=role, password=password)
        verb = "created" if result.created else "updated"
        self.stdout.write(f"{verb} {result.user.username} ({role})")
        if result.generated_password:
            self.stdout.write(
                f"password: {result.generated_password}  (shown once; change it after signing in)"
            )
