"""The prompt search's trigram index (migration 0007): on PostgreSQL it serves the SQL Django emits for the
search; on SQLite the migration does nothing; without the right to create pg_trgm it steps aside with a warning.

Every test runs in a rolled-back transaction, and PostgreSQL's DDL is transactional: the index, the extension
and the role these tests drop or make come back as they were.
"""

from __future__ import annotations

import importlib
import logging
import uuid

import pytest
from django.db import connection

from jobs.core.selectors import jobs_visible_to
from jobs.doors.filters import GalleryFilterForm, prompt_search
from jobs.models import Job
from jobs.tests.ui_fixtures import make_job

pytestmark = pytest.mark.django_db
migration = importlib.import_module("jobs.migrations.0007_prompt_trigram_index")
INDEX = migration.INDEX
on_postgresql = pytest.mark.skipif(connection.vendor != "postgresql", reason="the index is PostgreSQL's only")


def _index_exists() -> bool:
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", [INDEX])
        else:
            cur.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = %s", [INDEX])
        return cur.fetchone() is not None


def _plan(qs) -> str:
    """PostgreSQL's plan for ``qs`` when only a bitmap index scan could avoid reading the whole table: it names
    the trigram index only if the index's expression is the one in Django's SQL."""
    sql, params = qs.query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("SET LOCAL enable_indexscan = off")  # no walking jobs_created_idx and filtering instead
        cur.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cur.fetchall())


@on_postgresql
def test_on_postgresql_the_search_reads_the_trigram_index(member, device):
    for i in range(30):
        make_job(member, device, prompt=f"fox by the river {i}" if i % 3 else f"a lantern at dawn {i}")
    assert _index_exists()
    qs = prompt_search(Job.objects.all(), "River FOX")
    assert 'UPPER("jobs_job"."prompt"::text) LIKE UPPER(' in str(qs.query)  # what the index must match
    assert f"Bitmap Index Scan on {INDEX}" in _plan(qs.values("pk"))
    gallery = GalleryFilterForm({"q": "fox river"}, user=member).apply(jobs_visible_to(member))
    assert f"Bitmap Index Scan on {INDEX}" in _plan(gallery.order_by("-created", "-id")[:25])
    assert qs.count() == 20


@on_postgresql
def test_on_postgresql_the_migration_is_reversible(member, device):
    with connection.schema_editor() as editor:
        migration.backwards(None, editor)
    assert not _index_exists()
    assert f"Bitmap Index Scan on {INDEX}" not in _plan(prompt_search(Job.objects.all(), "fox").values("pk"))
    with connection.schema_editor() as editor:
        migration.add_trigram_index(editor.connection)
    assert _index_exists()


@on_postgresql
def test_without_the_right_to_create_pg_trgm_migrate_skips_the_index_and_says_so(caplog):
    with connection.cursor() as cur:
        cur.execute("SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user")
        if not cur.fetchone()[0]:
            pytest.skip("this database user may not make the unprivileged role the test needs")
        role = f"h_no_create_{uuid.uuid4().hex[:12]}"
        cur.execute(f"DROP INDEX {INDEX}")
        cur.execute("DROP EXTENSION pg_trgm")
        cur.execute(f"CREATE ROLE {role} NOLOGIN")  # no CREATE on the database: pg_trgm is out of its reach
        cur.execute(f"SET LOCAL ROLE {role}")
        with caplog.at_level(logging.WARNING, logger="jobs.migrations"):
            assert migration.add_trigram_index(connection) is False
        cur.execute("SELECT current_user")  # the transaction is still usable: the failure was a savepoint's
        assert cur.fetchone()[0] == role
        cur.execute("RESET ROLE")
    assert not _index_exists()
    assert "could not create the pg_trgm extension" in caplog.text
    assert "CREATE EXTENSION pg_trgm" in caplog.text and "migrate jobs 0006" in caplog.text


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's no-op")
def test_on_sqlite_the_migration_does_nothing(member, device):
    assert migration.add_trigram_index(connection) is False
    assert not _index_exists()
    make_job(member, device, prompt="Fox by the river")
    assert prompt_search(Job.objects.all(), "river fox").count() == 1
