from __future__ import annotations

from pathlib import Path

from django.apps import AppConfig
from django.core import checks
from django.db.backends.signals import connection_created

from hub import atrest, live
from hub.checks import check_data_folder, check_private_files


def private_database(sender, connection, **kwargs) -> None:
    """The SQLite file holds sign-in sessions: 0600 even when this process runs under a wider umask (``manage.py``
    by hand). SQLite gives its -wal and -shm files the database's own mode, so they follow from then on."""
    if connection.vendor != "sqlite":
        return
    name = str(connection.settings_dict["NAME"])
    for suffix in ("", "-wal", "-shm"):
        atrest.private_file(Path(name + suffix))


class HubConfig(AppConfig):
    name = "hub"
    verbose_name = "Tiiny Hub"

    def ready(self) -> None:
        live.register_topic("wire", live.wire_topic)
        checks.register(check_data_folder)
        checks.register(check_private_files)
        connection_created.connect(private_database, dispatch_uid="hub.private_database")
