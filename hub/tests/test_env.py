from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from hub.env import SettingError, env_bool, env_int, env_list, env_time_zone, env_url, load_env_file


def test_it_reads_booleans(monkeypatch):
    monkeypatch.setenv("X_FLAG", "yes")
    assert env_bool("X_FLAG") is True
    monkeypatch.setenv("X_FLAG", "0")
    assert env_bool("X_FLAG", True) is False


def test_it_names_the_variable_and_the_form_on_bad_values(monkeypatch):
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(SettingError, match=r"X_FLAG='maybe' is not a boolean"):
        env_bool("X_FLAG")
    monkeypatch.setenv("X_PORT", "80a")
    with pytest.raises(SettingError, match="X_PORT='80a' is not an integer"):
        env_int("X_PORT", 1)
    monkeypatch.setenv("X_PORT", "70000")
    with pytest.raises(SettingError, match="out of range"):
        env_int("X_PORT", 1, minimum=1, maximum=65535)
    monkeypatch.setenv("X_TZ", "Mars/Olympus")
    with pytest.raises(SettingError, match="IANA time zone"):
        env_time_zone("X_TZ", "UTC")
    monkeypatch.setenv("X_LIST", " , ")
    with pytest.raises(SettingError, match="comma-separated"):
        env_list("X_LIST", [])


@pytest.mark.parametrize(
    "url",
    ["mysql://hub:s3cret@db/hub", "http://:s3cret@127.0.0.1:6390/0"],  # a password without a user: Redis's
)
def test_it_never_echoes_a_password_in_a_url_error(monkeypatch, url):
    monkeypatch.setenv("X_DB", url)
    with pytest.raises(SettingError) as err:
        env_url("X_DB", None, schemes=("postgres",))
    assert "s3cret" not in str(err.value) and ":**@" in str(err.value)


def test_it_loads_an_env_file_without_overriding(tmp_path, monkeypatch):
    path = tmp_path / ".env"
    path.write_text("# comment\nX_A=1\nexport X_B='two'\n")
    monkeypatch.setenv("X_A", "kept")
    monkeypatch.delenv("X_B", raising=False)
    load_env_file(path)
    import os

    assert os.environ["X_A"] == "kept"
    assert os.environ["X_B"] == "two"


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("HUB_PORT", "eighty", "HUB_PORT='eighty' is not an integer"),
        ("HUB_TIME_ZONE", "Nowhere/Land", "HUB_TIME_ZONE='Nowhere/Land' is not an IANA time zone"),
        ("REDIS_URL", "http://x", "REDIS_URL='http://x' must be a URL starting with one of"),
        ("HUB_DEVICE", "tiiny", "HUB_DEVICE='tiiny' must be one of: emulator, none"),
        ("JOBS_POLL_INTERVAL_S", "fast", "JOBS_POLL_INTERVAL_S='fast' is not a number"),
        ("JOBS_SENDFILE", "nginx", "JOBS_SENDFILE='nginx' must be one of: , x-accel, x-sendfile"),
        ("HUB_TRUSTED_PROXIES", "nginx", "HUB_TRUSTED_PROXIES: 'nginx' is not an IP address or network"),
        (
            "HUB_NOTIFY_PRIVATE_HOSTS",
            "http://ha.lan",
            "HUB_NOTIFY_PRIVATE_HOSTS: 'http://ha.lan' is not a host",
        ),
        (
            "HUB_NOTIFY_PRIVATE_HOSTS",
            "ha.lan:99999",
            "HUB_NOTIFY_PRIVATE_HOSTS: 'ha.lan:99999' is not a host",
        ),
        # Both read as a host and a missing port by notify.targets, which refused them at every check.
        ("HUB_NOTIFY_PRIVATE_HOSTS", "dead:beef", "HUB_NOTIFY_PRIVATE_HOSTS: 'dead:beef' is not a host"),
        (
            "HUB_NOTIFY_PRIVATE_HOSTS",
            "192.168.1.20:",
            "HUB_NOTIFY_PRIVATE_HOSTS: '192.168.1.20:' is not a host",
        ),
    ],
)
def test_it_stops_start_up_with_one_line(name, value, expected, tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HUB_SECRET_KEY": "k", "HUB_DATA_DIR": str(tmp_path), name: value}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [f"tiiny-hub: configuration error: {lines[0].split('error: ', 1)[1]}"]
    assert expected in lines[0]


def test_it_passes_the_deploy_checks_when_served_over_https(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HUB_SECRET_KEY": "k" * 60 + "-Zq9!x", "HUB_DATA_DIR": str(tmp_path),
           "HUB_HTTPS": "1", "REDIS_URL": "redis://127.0.0.1:1/0"}  # fmt: skip
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr + result.stdout


def test_it_runs_the_named_loggers_at_debug_level(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HUB_SECRET_KEY": "k", "HUB_DATA_DIR": str(tmp_path),
           "HUB_DEBUG_LOGGERS": "jobs, devices.clients"}  # fmt: skip
    code = (
        "import logging, django; django.setup(); "
        "print([logging.getLogger(n).getEffectiveLevel() for n in ('jobs.queue.engine', 'devices.clients', 'hub')])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "DJANGO_SETTINGS_MODULE": "hub.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str([logging.DEBUG, logging.DEBUG, logging.INFO])


POOL_8 = {"min_size": 1, "max_size": 8, "timeout": 20, "max_idle": 300}
PG = "postgres://u@127.0.0.1:5432/hub"


@pytest.mark.parametrize(
    ("url", "web", "pool", "expected"),
    [
        (PG, True, None, POOL_8),  # a web server process: 8 by default
        (PG, True, "3", {**POOL_8, "max_size": 3}),
        (PG, True, "0", None),
        (PG, False, "8", None),  # worker, beat, manage.py: connect per use, whatever .env says
        ("sqlite:////tmp/x.sqlite3", True, "8", None),  # a file, no server connections to keep
    ],
)
def test_only_the_web_servers_postgresql_connections_are_pooled(url, web, pool, expected, tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HUB_SECRET_KEY": "k", "HUB_DATA_DIR": str(tmp_path), "DATABASE_URL": url}
    if web:
        env["HUB_WEB_SERVER_PROCESS"] = "4242"
    if pool is not None:
        env["HUB_DB_POOL"] = pool
    code = (
        "from django.conf import settings; import json; "
        "print(json.dumps(settings.DATABASES['default'].get('OPTIONS', {}).get('pool')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "DJANGO_SETTINGS_MODULE": "hub.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == expected


def test_the_web_server_marks_its_workers_as_web_processes(monkeypatch):
    from hub import webserver

    monkeypatch.setenv("HUB_WEB_SERVER_PROCESS", "")  # restored after the test (serve sets it for good)
    monkeypatch.setattr(webserver, "listening_socket", lambda host, port: (_ for _ in ()).throw(OSError("x")))
    with pytest.raises(SystemExit):  # stops at the socket, after the environment its workers inherit is set
        webserver.serve("127.0.0.1", 1, 2)
    assert os.environ["HUB_WEB_SERVER_PROCESS"] == str(os.getpid())
