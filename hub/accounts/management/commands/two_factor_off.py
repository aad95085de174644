from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from hub.accounts import two_factor
from hub.accounts.models import User


class Command(BaseCommand):
    help = (
        "Turn off a person's two-factor sign-in (they lost their phone and their recovery codes). They sign in "
        "with their password alone next; an admin under HUB_ADMIN_2FA is then asked to set it up again."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, *args, username: str, **options):
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no person {username!r} on this hub")
        if not two_factor.has_second_factor(user):
            self.stdout.write(f"{username} has no two-factor sign-in")
            return
        two_factor.second_factor_remove(user=user, by=None)
        self.stdout.write(f"{username}: two-factor sign-in is off")
