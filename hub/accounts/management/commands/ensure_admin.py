from __future__ import annotations

from django.core.management.base import BaseCommand

from hub.accounts.services import admin_exists, user_create_or_update


class Command(BaseCommand):
    help = "Create the first admin when there is none, and print its login once."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username: str, **options):
        if admin_exists():
            self.stdout.write("an admin already exists; sign in with your own login")
            return
        result = user_create_or_update(username=username, role="admin")
        if result.generated_password:
            self.stdout.write(f"first admin: {username} / {result.generated_password}  (shown once)")
        else:
            self.stdout.write(f"{username} is now an admin (password unchanged)")
