"""The hub's own system checks (``manage.py check``, ``migrate``, ``runserver`` and every command that checks).

``hub.E001``: the data folder (``HUB_DATA_DIR``) or its results folder can't be created or written. The web
server, the Celery worker and beat stop on the same test at start-up (``hub.disk.data_folder_problem``), since
Celery runs the system checks without stopping on them.
"""

from __future__ import annotations

from django.core import checks

from hub.disk import data_folder_problem


def check_data_folder(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    problem = data_folder_problem()
    if problem is None:
        return []
    return [checks.Error(problem, id="hub.E001")]
