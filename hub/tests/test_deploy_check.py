"""`manage.py check --deploy` is clean with the production settings docs/security.md documents."""

from __future__ import annotations

import secrets
import subprocess
import sys

import pytest
from django.conf import settings


def deploy_check(tmp_path, **overrides: str) -> subprocess.CompletedProcess:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "HUB_SECRET_KEY": secrets.token_urlsafe(50),
        "HUB_DEBUG": "0",
        "HUB_HTTPS": "1",
        "HUB_ALLOWED_HOSTS": "hub.example.lan",
        "HUB_CSRF_TRUSTED_ORIGINS": "https://hub.example.lan",
        "HUB_DATA_DIR": str(tmp_path / "data"),
        **overrides,
    }
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_the_documented_production_settings(tmp_path):
    proc = deploy_check(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "System check identified no issues" in proc.stdout
    assert "WARNING" not in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("overrides", "warning"),
    [
        ({"HUB_SECRET_KEY": "short"}, "security.W009"),
        ({"HUB_DEBUG": "1"}, "security.W018"),
        ({"HUB_HTTPS": "0"}, "security.W008"),
    ],
)
def test_the_check_would_catch_a_weaker_setup(tmp_path, overrides, warning):
    proc = deploy_check(tmp_path, **overrides)
    assert proc.returncode != 0 and warning in proc.stdout + proc.stderr
