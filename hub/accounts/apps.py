from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "hub.accounts"
    label = "accounts"
    verbose_name = "People"

    def ready(self) -> None:
        from django.core import checks

        from hub.accounts import signals  # noqa: F401  (signing out closes that session's sockets)
        from hub.accounts.checks import check_signin_config  # at ready(): it reads the models

        checks.register(check_signin_config)
