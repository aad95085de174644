"""Re-encrypt every stored device API key under the current secret key (see devices/crypto.py)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from devices.crypto import KeyUnreadable
from devices.services import device_rekey_all


class Command(BaseCommand):
    help = "After rotating HUB_SECRET_KEY (old value in HUB_SECRET_KEY_FALLBACKS): re-encrypt device keys."

    def handle(self, *args, **opts) -> None:
        try:
            n = device_rekey_all()
        except KeyUnreadable as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"re-encrypted {n} device key(s)")
