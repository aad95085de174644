#!/usr/bin/env python
"""`make worker`: a Celery worker alone, for a machine beside a device; the web server and beat run elsewhere.

It uses the hub's own PostgreSQL (``DATABASE_URL``), Redis (``REDIS_URL``), result store (``HUB_MEDIA_STORAGE``)
and secret (``HUB_SECRET_KEY``: the devices' keys are sealed with it), from the environment or ``.env``, and
refuses in one line when one is missing: a worker on another machine can use neither a private Redis nor this
machine's SQLite file. It starts no web server, no beat, no Redis, no emulator, and migrates nothing (the web
server's ``make up`` does).

``HUB_WORKER_DEVICES=name,…`` limits it to those devices: it consumes their queues (and the default queue, whose
tasks touch no device), so the worker that can reach a device is the one that drives it. Without it, it drives
every device, like ``make up``'s worker.

The worker runs under keepalive (a crash brings it back; its jobs resume from the database) with the profile's
pool (hub/profile.py). Its output goes to ``<data dir>/logs/worker.log``, rotated like ``make up``'s logs
(``make logs`` follows it); the console shows this script's own lines. Ctrl-C stops it (a warm shutdown: running
tasks finish) and exits 0.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))


def _load_up():
    """``scripts/up.py``'s parts (the log router, the console, the terminal): one way to run the hub's processes."""
    spec = importlib.util.spec_from_file_location("hub_script_up", BASE / "scripts" / "up.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


up = _load_up()
say, fail = up.say, up.fail

NEEDED = {
    "DATABASE_URL": "the hub's PostgreSQL",
    "REDIS_URL": "the hub's Redis",
    "HUB_SECRET_KEY": "the hub's secret",
}
NAME = "worker"


def missing_settings() -> list[str]:
    return [name for name in NEEDED if not os.environ.get(name, "").strip()]


def check_services() -> None:
    """The database and Redis answer, the database is migrated, the devices named exist: else one line."""
    import django
    import redis
    from django.conf import settings
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    django.setup()
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=3).ping()
    except Exception as exc:  # noqa: BLE001 - any failure is one line
        fail(f"REDIS_URL does not answer ({exc}). It must be the hub's Redis, reachable from this machine.")
    try:
        connection.ensure_connection()
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception as exc:  # noqa: BLE001
        fail(f"DATABASE_URL does not answer ({str(exc).strip().splitlines()[0]}).")
    if pending:
        fail(
            "the database is not migrated to this code's version: update the web server first "
            "(its `make up` migrates), and run the same version here."
        )


def worker_devices() -> str:
    """What this worker drives, for the console: the devices named (checked), or every device."""
    from devices.tasks import worker_device_ids  # reason: loads the models, after django.setup()
    from hub.celery import worker_device_names

    names = worker_device_names()
    if names is None:
        return "every device (HUB_WORKER_DEVICES unset)"
    if not names:
        return "no device, only the tasks that touch none (HUB_WORKER_DEVICES=none)"
    worker_device_ids(names)  # SettingError: a name that is no device
    return ", ".join(names)


def main() -> None:
    os.umask(0o077)  # as make up: the logs and whatever the worker writes are the owner's alone (hub.atrest)
    os.chdir(BASE)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
    from hub.env import load_env_file

    load_env_file(up.ENV_FILE)
    if missing := missing_settings():
        named = ", ".join(f"{m} ({NEEDED[m]})" for m in missing)
        fail(
            f"make worker needs {named} in the environment or .env: a worker on another machine shares the web "
            "server's database, Redis and secret (a private Redis or this machine's SQLite file would be its own)."
        )
    try:
        from hub import profile
        from hub.disk import unwritable_reason
        from hub.env import env_int, env_path

        data_dir = env_path("HUB_DATA_DIR", BASE / "var")
        chosen = profile.choose()
        log_max_mb = env_int("HUB_LOG_MAX_MB", up.DEFAULT_LOG_MAX_MB, minimum=1, maximum=100_000)
        log_keep = env_int("HUB_LOG_KEEP", up.DEFAULT_LOG_KEEP, minimum=1, maximum=1000)
        check_services()
        drives = worker_devices()
    except Exception as exc:  # noqa: BLE001 - SettingError: one line, no traceback
        fail(f"configuration error: {exc}")
    if reason := unwritable_reason(data_dir):
        fail(
            f"the data folder {data_dir} cannot be used: {reason}. Set HUB_DATA_DIR to a folder it may write."
        )
    from django.db import connections

    connections.close_all()

    router = up.LogRouter(data_dir / "logs", max_bytes=log_max_mb * 1024 * 1024, keep=log_keep)
    argv = chosen.worker_command(python=up.PY, wrap=up.KEEPALIVE)
    say(f"worker for {drives}; {chosen.describe().split(':')[0]}, pool of {chosen.pool}")
    say(f"logs: {router.path_for(NAME)} (follow them: make logs)  ·  Stop: Ctrl-C")
    sys.exit(run(argv, router))


def run(argv: list[str], router) -> int:
    """Run ``argv`` (keepalive and the worker) in a session of its own, its output into the log router, until it
    ends or a signal asks this script to stop; 0 after a stop asked for."""
    env = {**os.environ, up.PDEATHSIG_ENV: str(os.getpid())}
    child = subprocess.Popen(
        argv, cwd=BASE, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    asked = threading.Event()

    def stop(*_args) -> None:
        if not asked.is_set():
            asked.set()
            up.tell("\ntiiny-hub: stopping the worker (running tasks finish first)…")
        try:
            child.send_signal(signal.SIGTERM)  # keepalive passes it on: Celery's warm shutdown
        except OSError:
            pass

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    threading.Thread(target=up.stop_when_orphaned, daemon=True).start()

    def log(data: bytes | str) -> None:
        router.write(SimpleNamespace(name=NAME, data=data, time=dt.datetime.now()))

    log(f"tiiny-hub: make worker (pid {os.getpid()}) runs {' '.join(argv)}")
    for line in iter(child.stdout.readline, b""):
        log(line)
    code = child.wait()
    log(f"tiiny-hub: the worker stopped (exit {code})")
    router.close()
    if asked.is_set():
        say(f"worker stopped at {dt.datetime.now():%H:%M:%S}.")
        return 0
    say(f"the worker stopped by itself (exit {code}); see {router.path_for(NAME)}")
    return code or 1


if __name__ == "__main__":
    give_back_terminal = up.own_terminal()
    try:
        main()
    except KeyboardInterrupt:  # Ctrl-C during the checks
        up.tell("\ntiiny-hub: stopped before the worker started.")
        sys.exit(0)
    finally:
        give_back_terminal()
