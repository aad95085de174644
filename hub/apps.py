from __future__ import annotations

from django.apps import AppConfig

from hub import live


class HubConfig(AppConfig):
    name = "hub"
    verbose_name = "Tiiny Hub"

    def ready(self) -> None:
        live.register_topic("wire", live.wire_topic)
