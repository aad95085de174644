from __future__ import annotations

from django.apps import AppConfig


class HubConfig(AppConfig):
    name = "hub"
    verbose_name = "Tiiny Hub"

    def ready(self) -> None:
        from hub import live

        live.register_topic("wire", live.wire_topic)
