"""Re-seal every notification channel's secrets under the current secret key (see notify/crypto.py)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from notify.services import channel_rekey_all


class Command(BaseCommand):
    help = "After rotating HUB_SECRET_KEY (old value in HUB_SECRET_KEY_FALLBACKS): re-seal notification channels."

    def handle(self, *args, **opts) -> None:
        done, lost = channel_rekey_all()
        self.stdout.write(f"re-sealed {done} channel(s)")
        if lost:
            self.stderr.write(
                f"{lost} channel(s) could not be read with any configured key: edit them and enter their URL or secret again"
            )
