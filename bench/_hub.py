"""What several benchmarks share: a throw-away hub of their own (not a ``bench_*.py``: ``make bench`` skips it).

``private_hub`` makes a temp data dir, starts a private Redis, points the settings at both and at a fresh
SQLite file, sets Django up and migrates; it yields the data dir and the Redis, and stops the Redis after.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def private_hub(name: str, **env: str) -> Iterator[tuple[Path, object]]:
    from hub.redis_server import start_private_redis

    tmp = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
    redis = start_private_redis(run_dir=tmp / "run")
    os.environ.update(
        REDIS_URL=redis.url,
        HUB_DATA_DIR=str(tmp),
        DATABASE_URL=f"sqlite:///{tmp / 'hub.sqlite3'}",
        HUB_SECRET_KEY="bench",
        HUB_INSECURE_FAST_HASHER="1",
        DJANGO_SETTINGS_MODULE="hub.settings",
        **env,
    )
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        yield tmp, redis
    finally:
        redis.stop()
