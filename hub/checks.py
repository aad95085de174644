"""The hub's own system checks (``manage.py check``, ``migrate``, ``runserver`` and every command that checks).

``hub.E001``: the data folder (``HUB_DATA_DIR``) or its results folder can't be created or written. The web
server, the Celery worker and beat stop on the same test at start-up (``hub.disk.data_folder_problem``), since
Celery runs the system checks without stopping on them.

``hub.W002``: the data folder, its database, its logs or its media folder are open to other users of the machine
(``hub.atrest.opened_up``). A warning, not an error: the hub works, but its sessions and pictures are not private.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core import checks

from hub.atrest import opened_up_warning
from hub.disk import data_folder_problem


def check_data_folder(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    problem = data_folder_problem()
    if problem is None:
        return []
    return [checks.Error(problem, id="hub.E001")]


def check_private_files(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    warning = opened_up_warning(Path(settings.DATA_DIR))
    return [checks.Warning(warning, id="hub.W002")] if warning else []
