"""The op-level helpers of revision ``sajq_0012``: the counters of ended jobs.

`add_counters` / `drop_counters`, run inside Alembic's ``op`` context by the shipped
revision and by `upgrade_to`; re-exported by `sa_jobqueue.migration`. The tables and the
trigger's text are `sa_jobqueue.schema.counters`'. See docs/observability.md#counters.
"""

from __future__ import annotations

from sqlalchemy import Connection, MetaData, Table, inspect, text

from alembic import op
from sa_jobqueue.migration.ops import jobs_table
from sa_jobqueue.schema import ddl
from sa_jobqueue.schema.counters import (
    backfill_sql,
    counter_trigger_sql,
    counts_table_for,
    drop_counter_trigger_sql,
    ended_table_for,
)
from sa_jobqueue.schema.naming import counts_table, ended_table

__all__ = ["add_counters", "drop_counters", "has_counters"]


def _bare_tables(name: str, schema: str | None) -> tuple[Table, Table]:
    """Both counter tables, copied without the ``create_all`` trigger DDL they carry."""
    table = jobs_table(name, schema=schema)
    bare = MetaData()
    counts = counts_table_for(table).to_metadata(bare)
    return counts, ended_table_for(table).to_metadata(bare)


def add_counters(name: str = "jobs", *, schema: str | None = None) -> None:
    """Revision ``sajq_0012``: count the jobs that end, per minute, queue, kind and status.

    Creates ``sa_jobqueue_counts_<name>`` (the rollup) and ``sa_jobqueue_ended_<name>``
    (the log of ended jobs not yet rolled up), the trigger that appends to the log, and
    counts the finished jobs the table holds into the rollup with one ``INSERT ...
    SELECT`` (one read of the table's finished rows). The jobs table is not altered:
    pending and running jobs keep running. On PostgreSQL and SQLite it is one
    transaction: the trigger's lock on the table makes a job that ends meanwhile wait,
    then count once. On MySQL/MariaDB each DDL statement commits on its own: upgrade
    with the workers stopped for exact counters (a job ending during the upgrade may
    be counted by both). Counters that exist already (``create_all`` of this version)
    are kept and not filled again. `drop_counters` undoes it.
    """
    ddl.qualified(name, schema)
    bind = op.get_bind()
    counts, ended = _bare_tables(name, schema)
    fresh = not inspect(bind).has_table(counts.name, schema=schema)
    counts.create(bind, checkfirst=True)
    ended.create(bind, checkfirst=True)
    dialect = bind.dialect.name
    for sql in drop_counter_trigger_sql(dialect, name, schema):
        if dialect != "postgresql":  # PostgreSQL: CREATE OR REPLACE, and the triggers below
            op.execute(text(sql))
    if dialect == "postgresql":
        for trigger in ("sa_jobqueue_count_ended", "sa_jobqueue_count_inserted"):
            op.execute(text(f"DROP TRIGGER IF EXISTS {trigger} ON {ddl.qualified(name, schema)}"))
    for sql in counter_trigger_sql(dialect, name, schema):
        op.execute(text(sql))
    if fresh:
        op.execute(text(backfill_sql(dialect, name, schema)))


def drop_counters(name: str = "jobs", *, schema: str | None = None) -> None:
    """Undo `add_counters` (the counters are lost; the jobs table keeps its rows)."""
    ddl.qualified(name, schema)
    bind = op.get_bind()
    for sql in drop_counter_trigger_sql(bind.dialect.name, name, schema):
        op.execute(text(sql))
    counts, ended = _bare_tables(name, schema)
    ended.drop(bind, checkfirst=True)
    counts.drop(bind, checkfirst=True)


def has_counters(connection: Connection, name: str, schema: str | None) -> bool:
    """True when the jobs table `name` has its counters (``sajq_0012``)."""
    inspector = inspect(connection)
    return all(
        inspector.has_table(table(name), schema=schema) for table in (counts_table, ended_table)
    )
