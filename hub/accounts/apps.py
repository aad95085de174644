from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "hub.accounts"
    label = "accounts"
    verbose_name = "People"
