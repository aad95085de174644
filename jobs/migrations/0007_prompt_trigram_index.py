"""PostgreSQL only: a trigram index for the prompt search (``jobs.filters.prompt_search``, the gallery and the API).

Django's ``prompt__icontains`` is ``UPPER("jobs_job"."prompt"::text) LIKE UPPER('%word%')`` on PostgreSQL: a
B-tree cannot serve a LIKE with a leading ``%``, so each search read every row (a word found nowhere: 22 ms at
100k jobs; "fox river", estimated as 2 rows, seq-scanned and sorted: 56 ms). A GIN index over the same
expression with ``gin_trgm_ops`` answers the LIKE itself (a rare word: 0.1 ms), and the statistics ANALYZE keeps
for the indexed expression tell the planner how common a word is (a common one walks ``jobs_created_idx`` and
stops at the page's 25th match: 0.5 ms). ``prompt`` is a text column, so PostgreSQL stores ``prompt::text`` as
``upper(prompt)``, as it plans the query: the index matches Django's SQL.

SQLite: nothing (its LIKE has no such index; the search stays a scan there). ``pg_trgm`` is created when missing
(a trusted extension since PostgreSQL 13: the database's owner may); without the privilege the index is skipped
with a warning saying how to add it later, rather than failing ``migrate``. Reversed, the index is dropped and the
extension stays (other things in the database may use it; it costs nothing unused).
"""

from __future__ import annotations

import logging

from django.db import DatabaseError, migrations, transaction

log = logging.getLogger("jobs.migrations")

INDEX = "jobs_prompt_trgm_idx"


def add_trigram_index(connection, table: str = "jobs_job") -> bool:
    """Create the index on a PostgreSQL ``connection`` (True), or say why not (False); no-op elsewhere."""
    if connection.vendor != "postgresql":
        return False
    qn = connection.ops.quote_name
    with connection.cursor() as cur:
        schema = _trgm_schema(cur)
        if schema is None:
            try:
                with transaction.atomic(
                    using=connection.alias
                ):  # a savepoint: the migration's transaction lives on
                    cur.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            except DatabaseError as exc:
                log.warning(
                    "jobs: no trigram index for the prompt search (the search still works, by reading every "
                    "job): could not create the pg_trgm extension (%s). To add it: have the database's owner "
                    "run CREATE EXTENSION pg_trgm; in this database, then run manage.py migrate jobs 0006 and "
                    "manage.py migrate.",
                    str(exc).strip().splitlines()[0],
                )
                return False
            schema = _trgm_schema(cur)
        cur.execute(
            f"CREATE INDEX IF NOT EXISTS {qn(INDEX)} ON {qn(table)} "
            f"USING gin (UPPER({qn('prompt')}::text) {qn(schema)}.gin_trgm_ops)"
        )
    return True


def _trgm_schema(cur) -> str | None:
    """The schema pg_trgm lives in (its operator class is named through it: it need not be on search_path)."""
    cur.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'pg_trgm'"
    )
    row = cur.fetchone()
    return row[0] if row else None


def forwards(apps, schema_editor):
    add_trigram_index(schema_editor.connection, apps.get_model("jobs", "Job")._meta.db_table)


def backwards(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {connection.ops.quote_name(INDEX)}")


class Migration(migrations.Migration):
    dependencies = [("jobs", "0006_quotas")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
