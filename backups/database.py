"""The database half of a backup: a consistent snapshot taken while the hub runs, its row counts and migration
state, and putting a snapshot back.

SQLite: the online backup API (``sqlite3.Connection.backup``) copies the live file in one step, a single read
transaction: with WAL the hub's writers go on meanwhile and the copy is the database as of one instant. The copy is
switched out of WAL so it is one self-contained file.

PostgreSQL: ``pg_dump --format=custom`` (its own consistent snapshot) and ``pg_restore --clean --if-exists
--no-owner``, when the PostgreSQL client programs are on the PATH; without them, one line says to install them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

from django.apps import apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder

SQLITE_FILE = "database.sqlite3"
PG_FILE = "database.pgdump"
FILES_BY_VENDOR = {"sqlite": SQLITE_FILE, "postgresql": PG_FILE}


class DatabaseBackupError(Exception):
    """The database could not be saved or put back; ``str()`` is one line saying why and what to do."""


def vendor() -> str:
    return connection.vendor


def _sqlite_path() -> Path:
    return Path(connection.settings_dict["NAME"])


def _pg_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise DatabaseBackupError(
            f"{name} is not on the PATH: install the PostgreSQL client programs "
            "(Debian/Ubuntu: apt-get install postgresql-client) to back up or restore a PostgreSQL hub"
        )
    return path


def _pg_args_env() -> tuple[list[str], dict[str, str]]:
    db = connection.settings_dict
    args = ["--host", str(db.get("HOST") or "127.0.0.1"), "--port", str(db.get("PORT") or 5432)]
    if db.get("USER"):
        args += ["--username", db["USER"]]
    env = dict(os.environ)
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = db["PASSWORD"]
    args += ["--dbname", db["NAME"]]
    return args, env


def _run_tool(argv: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no message"]
        raise DatabaseBackupError(f"{Path(argv[0]).name} failed ({done.returncode}): {last[0]}")


# -- taking the snapshot -----------------------------------------------------------------------------------------
def snapshot(folder: Path) -> Path:
    """Write this hub's database into ``folder``; returns the file written."""
    if vendor() == "sqlite":
        return _sqlite_snapshot(folder / SQLITE_FILE)
    if vendor() == "postgresql":
        dest = folder / PG_FILE
        args, env = _pg_args_env()
        _run_tool([_pg_tool("pg_dump"), "--format=custom", "--no-owner", "--file", str(dest), *args], env)
        return dest
    raise DatabaseBackupError(
        f"backing up a {vendor()} database is not supported (SQLite and PostgreSQL are)"
    )


def _sqlite_snapshot(dest: Path) -> Path:
    source = _sqlite_path()
    if not source.is_file():
        raise DatabaseBackupError(f"the database file {source} does not exist")
    src = sqlite3.connect(source, timeout=30)
    try:
        with contextlib.closing(sqlite3.connect(dest)) as out:
            src.backup(out)  # pages=-1: one step, one read transaction, so one instant of the database
            out.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
    finally:
        src.close()
    return dest


# -- what a snapshot holds -----------------------------------------------------------------------------------------
def model_tables() -> dict[str, str]:
    """Every installed model's label -> its table (many-to-many tables included)."""
    return {
        m._meta.label: m._meta.db_table
        for m in apps.get_models(include_auto_created=True)
        if m._meta.managed and not m._meta.proxy
    }


def row_counts(snapshot_file: Path | None = None) -> dict[str, dict]:
    """``label -> {"table", "rows"}`` for every model: read from the SQLite snapshot itself (so the counts are the
    snapshot's), else from the live database (PostgreSQL: the dump took its own snapshot a moment earlier)."""
    tables = model_tables()
    if snapshot_file is not None and snapshot_file.name == SQLITE_FILE:
        with contextlib.closing(sqlite3.connect(snapshot_file)) as db:
            present = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            return {
                label: {"table": t, "rows": db.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]}
                for label, t in sorted(tables.items())
                if t in present
            }
    return live_row_counts(tables)


def live_row_counts(tables: dict[str, str] | None = None) -> dict[str, dict]:
    tables = model_tables() if tables is None else tables
    present = set(connection.introspection.table_names())
    counts = {}
    with connection.cursor() as cursor:
        for label, table in sorted(tables.items()):
            if table not in present:
                continue
            cursor.execute(f"SELECT COUNT(*) FROM {connection.ops.quote_name(table)}")
            counts[label] = {"table": table, "rows": cursor.fetchone()[0]}
    return counts


def migration_state(snapshot_file: Path | None = None) -> dict[str, list[str]]:
    """``app -> [applied migration names]``: the snapshot's own record for SQLite, the live one otherwise."""
    if snapshot_file is not None and snapshot_file.name == SQLITE_FILE:
        with contextlib.closing(sqlite3.connect(snapshot_file)) as db:
            rows = db.execute("SELECT app, name FROM django_migrations").fetchall()
    else:
        rows = list(MigrationRecorder(connection).applied_migrations())
    state: dict[str, list[str]] = {}
    for app, name in rows:
        state.setdefault(app, []).append(name)
    return {app: sorted(names) for app, names in sorted(state.items())}


def pending_migrations() -> int:
    """How many migrations this checkout has that the database has not applied."""
    executor = MigrationExecutor(connection)
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


# -- putting a snapshot back ---------------------------------------------------------------------------------------
def restore(snapshot_file: Path) -> None:
    """Replace this hub's database with the snapshot (the caller checked the vendor and that the hub is stopped)."""
    connection.close()
    if vendor() == "sqlite":
        target = _sqlite_path()
        target.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.closing(sqlite3.connect(snapshot_file)) as src:
            with contextlib.closing(sqlite3.connect(target, timeout=30)) as dst:
                src.backup(dst)  # page by page over the whole target: what it held before is gone
        return
    args, env = _pg_args_env()
    _run_tool(
        [_pg_tool("pg_restore"), "--clean", "--if-exists", "--no-owner", *args, str(snapshot_file)], env
    )
