"""Loaded with ``-p hub.pytest_env`` before pytest-django imports the settings.

It gives every test run its own private Redis (never anyone else's), and a secret key.
The Redis lives as long as the pytest process and is stopped by its pid at the end.
"""

from __future__ import annotations

import atexit
import os
from pathlib import Path

os.environ.setdefault("HUB_SECRET_KEY", "test-secret-key-not-for-production")
os.environ["HUB_DEBUG"] = "0"
os.environ["HUB_INSECURE_FAST_HASHER"] = "1"
# No floor of free disk space unless a test sets one: the suite must not depend on the machine's free space
# (hub/tests/test_disk_health.py and jobs/tests/disk/ set the floor they test).
os.environ.setdefault("HUB_MIN_FREE_MB", "0")
# No limit on the new-job form's summaries either: tests ask for several in a row as one person, and the counters
# (kept by person id, which every rolled-back test reuses) would carry from test to test. Tests of the limit set it.
os.environ.setdefault("HUB_PREVIEW_RATE", "0")

# pytest-xdist's workers (make test runs the tests on two) inherit the first process's environment: each gets
# its own Redis and database instead, so no two tests running at once share a key or a row, and its own data
# folder (results, uploads, the logs of the servers it starts): the two databases number their jobs alike, and
# a job's files are kept by its number; a server's log is read to see it start.
if _xdist_worker := os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("HUB_TEST_REDIS_URL", None)
    os.environ.pop("HUB_TEST_DB", None)
    _data = Path(os.environ.get("HUB_DATA_DIR", Path(__file__).resolve().parent.parent / "var"))
    os.environ["HUB_DATA_DIR"] = str(_data / "xdist" / _xdist_worker)

_private = None
if not os.environ.get("HUB_TEST_REDIS_URL"):
    from hub.redis_server import start_private_redis

    _run_dir = Path(os.environ.get("HUB_DATA_DIR", Path(__file__).resolve().parent.parent / "var")) / "run"
    _private = start_private_redis(run_dir=_run_dir)
    os.environ["HUB_TEST_REDIS_URL"] = _private.url
    atexit.register(_private.stop)
os.environ["REDIS_URL"] = os.environ["HUB_TEST_REDIS_URL"]

# One SQLite test database per run (the worker and ASGI server the tests start open the same file).
if not os.environ.get("HUB_TEST_DB"):
    _db = Path(os.environ.get("HUB_DATA_DIR", Path(__file__).resolve().parent.parent / "var")) / "run"
    _db.mkdir(parents=True, exist_ok=True)
    _db_path = _db / f"test-hub-{os.getpid()}.sqlite3"
    os.environ["HUB_TEST_DB"] = str(_db_path)

    def _remove_test_db() -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{_db_path}{suffix}").unlink(missing_ok=True)

    atexit.register(_remove_test_db)

# WhiteNoise warns when STATIC_ROOT is missing; tests serve static files through the finders.
(Path(__file__).resolve().parent.parent / "staticfiles").mkdir(exist_ok=True)

# Playwright's sync API runs an event loop in the test thread; the ORM calls tests make beside it are
# still plain synchronous code. (Only the test process gets this; the servers it starts do not.)
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
