from __future__ import annotations

from django.apps import AppConfig
from django.core import checks

from hub import live
from hub.checks import check_data_folder


class HubConfig(AppConfig):
    name = "hub"
    verbose_name = "Tiiny Hub"

    def ready(self) -> None:
        live.register_topic("wire", live.wire_topic)
        checks.register(check_data_folder)
