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
from dataclasses import dataclass
from pathlib import Path

from django.apps import apps
from django.db import connection, transaction
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
@dataclass
class Snapshot:
    file: Path
    counts: dict[str, dict]  # label -> {"table", "rows"}, as of the snapshot
    migrations: dict[str, list[str]]  # app -> applied migration names, as of the snapshot


def snapshot(folder: Path) -> Snapshot:
    """Write this hub's database into ``folder``, with its row counts and migrations as of that same instant."""
    if vendor() == "sqlite":
        dest = _sqlite_snapshot(folder / SQLITE_FILE)
        return Snapshot(dest, row_counts(dest), migration_state(dest))
    if vendor() == "postgresql":
        return _pg_snapshot(folder / PG_FILE)
    raise DatabaseBackupError(
        f"backing up a {vendor()} database is not supported (SQLite and PostgreSQL are)"
    )


def _pg_snapshot(dest: Path) -> Snapshot:
    """pg_dump reads the snapshot a transaction of ours exported, and that transaction counts the rows: the counts
    are the dump's, however much the hub writes meanwhile."""
    tool = _pg_tool("pg_dump")
    args, env = _pg_args_env()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        cursor.execute("SELECT pg_export_snapshot()")
        exported = cursor.fetchone()[0]
        _run_tool(
            [tool, "--format=custom", "--no-owner", f"--snapshot={exported}", "--file", str(dest), *args], env
        )
        return Snapshot(dest, live_row_counts(), migration_state())


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


def row_counts(sqlite_file: Path) -> dict[str, dict]:
    """``label -> {"table", "rows"}`` for every model, read from a SQLite snapshot itself."""
    tables = model_tables()
    with contextlib.closing(sqlite3.connect(sqlite_file)) as db:
        present = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        return {
            label: {"table": t, "rows": db.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]}
            for label, t in sorted(tables.items())
            if t in present
        }


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


def migration_state(sqlite_file: Path | None = None) -> dict[str, list[str]]:
    """``app -> [applied migration names]``: a SQLite snapshot's own record, else the live database's."""
    if sqlite_file is not None:
        with contextlib.closing(sqlite3.connect(sqlite_file)) as db:
            rows = db.execute("SELECT app, name FROM django_migrations").fetchall()
    else:
        rows = list(MigrationRecorder(connection).applied_migrations())
    state: dict[str, list[str]] = {}
    for app, name in rows:
        state.setdefault(app, []).append(name)
    return {app: sorted(names) for app, names in sorted(state.items())}


def exists() -> bool:
    """False for a SQLite hub whose database file was never made (a first start): nothing to back up."""
    return vendor() != "sqlite" or _sqlite_path().is_file()


def prepare_target() -> None:
    """A SQLite hub restored into a new data folder: make the folder its database file goes in."""
    if vendor() == "sqlite":
        _sqlite_path().parent.mkdir(parents=True, exist_ok=True)


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
