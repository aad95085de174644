from __future__ import annotations

from django.apps import AppConfig

from hub import live


class DevicesConfig(AppConfig):
    name = "devices"
    verbose_name = "Devices"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # These import the models: the app registry is ready only now.
        from devices import live as devices_live
        from devices.selectors import device_names, device_names_for, devices_named_for
        from hub.accounts.tokens import register_device_lookup

        live.register_topic("device", devices_live.device_topic)
        live.register_topic("card", devices_live.card_topic)
        # Accounts sit below devices: a token bound to devices finds them by name through this.
        register_device_lookup(devices_named_for, device_names, device_names_for)
