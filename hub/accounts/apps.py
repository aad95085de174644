from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "hub.accounts"
    label = "accounts"
    verbose_name = "People"

    def ready(self) -> None:
        from hub.accounts import signals  # noqa: F401  (signing out closes that session's sockets)
