"""The counters of ended jobs beside a jobs table: two small tables, the trigger feeding them.

``sa_jobqueue_ended_<table>`` gets one row per job that ends (``done``, ``failed`` or
``cancelled``), appended by a row trigger on the jobs table in the ending statement's own
transaction: no key is shared, so concurrent workers never wait on each other there.
The maintenance loop moves those rows, under its lock, into ``sa_jobqueue_counts_<table>``:
one row per minute, queue, kind and status (`sa_jobqueue.driver.protocol.counters`).
Readers add the two (`sa_jobqueue.statements.counters`). The same definitions serve
revision ``sajq_0012`` and ``create_all``. See docs/observability.md#counters.
"""
# ruff: noqa: S608 - SQL text of checked identifiers and our own constants only

from __future__ import annotations

from sqlalchemy import (
    DDL,
    BigInteger,
    Column,
    Float,
    Identity,
    PrimaryKeyConstraint,
    Table,
    event,
)

from sa_jobqueue.schema.naming import check_identifier, counts_table, ended_table
from sa_jobqueue.schema.registry_tables import declared_beside
from sa_jobqueue.schema.types import MYSQL, Id, Key, Timestamp

__all__ = [
    "add_counters",
    "backfill_sql",
    "counter_trigger_sql",
    "counts_table_for",
    "drop_counter_trigger_sql",
    "ended_table_for",
]

_FINISHED = "'done', 'failed', 'cancelled'"
#: What the trigger counts on an UPDATE. Not ``done``: the drivers' done statements count
#: their jobs, one log row per minute, queue and kind of a batch, not a call per job.
_ENDED_ELSE = "'failed', 'cancelled'"


def counts_table_for(table: Table) -> Table:
    """The rollup beside the jobs table `table`: jobs ended per minute, queue, kind, status.

    ``seconds`` sums, and ``max_seconds`` is the largest of, the seconds from ``run_at``
    to ``finished_at`` of those jobs (the overview's latency line).
    """
    name = counts_table(table.name)
    existing = declared_beside(table, name)
    if existing is not None:
        return existing
    return Table(
        name,
        table.metadata,
        Column("minute", Timestamp(), nullable=False),
        Column("queue", Key, nullable=False),
        Column("kind", Key, nullable=False),
        Column("status", Key, nullable=False),
        Column("jobs", BigInteger, nullable=False),
        Column("seconds", Float, nullable=False),
        Column("max_seconds", Float, nullable=False),
        PrimaryKeyConstraint("minute", "queue", "kind", "status", name=f"pk_{table.name}_counts"),
        schema=table.schema,
    )


def ended_table_for(table: Table) -> Table:
    """The append-only log of ended jobs not yet moved into `counts_table_for` (one row each)."""
    name = ended_table(table.name)
    existing = declared_beside(table, name)
    if existing is not None:
        return existing
    return Table(
        name,
        table.metadata,
        Column("id", Id, Identity(), nullable=False),
        Column("minute", Timestamp(), nullable=False),
        Column("queue", Key, nullable=False),
        Column("kind", Key, nullable=False),
        Column("status", Key, nullable=False),
        Column("jobs", BigInteger, nullable=False),
        Column("seconds", Float, nullable=False),
        Column("max_seconds", Float, nullable=False),
        PrimaryKeyConstraint("id", name=f"pk_{table.name}_ended"),
        schema=table.schema,
    )


def _names(table: str, schema: str | None) -> tuple[str, str, str]:
    check_identifier(table)
    if schema is not None:
        check_identifier(schema)
    prefix = f'"{schema}".' if schema else ""
    return prefix, f'{prefix}"{table}"', f'{prefix}"{ended_table(table)}"'


def _function(table: str) -> str:
    return f"{table}_count_ended"


def counter_trigger_sql(dialect: str, table: str, schema: str | None = None) -> list[str]:
    """The statements that make the trigger(s) appending an ended job to the log.

    A job counts when an UPDATE moves it from an unfinished status to a finished one,
    or when it is inserted finished; in the minute of its ``finished_at``. An UPDATE to
    ``done`` is left to the drivers' done statements, which count their jobs themselves
    (`sa_jobqueue.driver.postgres.counters.counting_done`, `PortableCounters.count_done`).
    """
    prefix, jobs, ended = _names(table, schema)
    if dialect == "postgresql":
        function = f'{prefix}"{_function(table)}"'
        # date_bin on the epoch: a UTC minute whatever the session's time zone.
        body = f"""
CREATE OR REPLACE FUNCTION {function}() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {ended} (minute, queue, kind, status, jobs, seconds, max_seconds)
    SELECT date_bin('1 minute', coalesce(NEW.finished_at, now()), '1970-01-01 00:00:00+00'),
           NEW.queue, NEW.kind, NEW.status, 1, took, took
    FROM (SELECT coalesce(extract(epoch FROM NEW.finished_at - NEW.run_at), 0) AS took) AS t;
    RETURN NULL;
END
$$"""
        return [
            body,
            f"CREATE TRIGGER sa_jobqueue_count_ended AFTER UPDATE OF status ON {jobs}"
            f" FOR EACH ROW WHEN (NEW.status IN ({_ENDED_ELSE})"
            f" AND OLD.status NOT IN ({_FINISHED})) EXECUTE FUNCTION {function}()",
            f"CREATE TRIGGER sa_jobqueue_count_inserted AFTER INSERT ON {jobs}"
            f" FOR EACH ROW WHEN (NEW.status IN ({_FINISHED})) EXECUTE FUNCTION {function}()",
        ]
    if dialect == "sqlite":
        # Statements inside a SQLite trigger name their tables unqualified.
        values = (
            f'INSERT INTO "{ended_table(table)}"'
            " (minute, queue, kind, status, jobs, seconds, max_seconds)"
            " SELECT strftime('%Y-%m-%d %H:%M:00.000000', coalesce(NEW.finished_at, 'now')),"
            " NEW.queue, NEW.kind, NEW.status, 1, took, took FROM (SELECT"
            " coalesce((julianday(NEW.finished_at) - julianday(NEW.run_at)) * 86400.0, 0)"
            " AS took);"
        )
        return [
            f'CREATE TRIGGER IF NOT EXISTS {prefix}"{_trigger(table, "ended")}"'
            f' AFTER UPDATE OF status ON "{table}" FOR EACH ROW'
            f" WHEN NEW.status IN ({_ENDED_ELSE}) AND OLD.status NOT IN ({_FINISHED})"
            f" BEGIN {values} END",
            f'CREATE TRIGGER IF NOT EXISTS {prefix}"{_trigger(table, "inserted")}"'
            f' AFTER INSERT ON "{table}" FOR EACH ROW WHEN NEW.status IN ({_FINISHED})'
            f" BEGIN {values} END",
        ]
    if dialect in MYSQL:
        jobs, ended = jobs.replace('"', "`"), ended.replace('"', "`")
        prefix = prefix.replace('"', "`")

        def insert(condition: str) -> str:
            return (
                f"INSERT INTO {ended} (minute, queue, kind, status, jobs, seconds, max_seconds)"
                " SELECT CAST(DATE_FORMAT(coalesce(NEW.finished_at, UTC_TIMESTAMP(6)),"
                " '%Y-%m-%d %H:%i:00') AS DATETIME(6)),"
                " NEW.queue, NEW.kind, NEW.status, 1, took, took FROM (SELECT"
                " coalesce(TIMESTAMPDIFF(MICROSECOND, NEW.run_at, NEW.finished_at) / 1e6, 0)"
                f" AS took) AS t WHERE {condition}"
            )

        return [
            f"CREATE TRIGGER {prefix}`{_trigger(table, 'ended')}` AFTER UPDATE ON {jobs}"
            " FOR EACH ROW "
            + insert(f"NEW.status IN ({_ENDED_ELSE}) AND OLD.status NOT IN ({_FINISHED})"),
            f"CREATE TRIGGER {prefix}`{_trigger(table, 'inserted')}` AFTER INSERT ON {jobs}"
            " FOR EACH ROW " + insert(f"NEW.status IN ({_FINISHED})"),
        ]
    raise ValueError(f"no counters trigger for the dialect {dialect!r}")


def _trigger(table: str, event: str) -> str:
    """SQLite and MySQL name triggers per schema: the table is part of the name."""
    return f"sajq_{event}_{table}"


def drop_counter_trigger_sql(dialect: str, table: str, schema: str | None = None) -> list[str]:
    """Drop what `counter_trigger_sql` made (the tables stay: `counts_table_for`'s drop)."""
    prefix, _, _ = _names(table, schema)
    if dialect == "postgresql":
        return [f'DROP FUNCTION IF EXISTS {prefix}"{_function(table)}"() CASCADE']
    quote = "`" if dialect in MYSQL else '"'
    prefix = prefix.replace('"', quote)
    return [
        f"DROP TRIGGER IF EXISTS {prefix}{quote}{_trigger(table, event)}{quote}"
        for event in ("ended", "inserted")
    ]


def backfill_sql(dialect: str, table: str, schema: str | None = None) -> str:
    """One ``INSERT ... SELECT`` counting the finished jobs a table holds into its rollup.

    What revision ``sajq_0012`` runs once, in the transaction that creates the trigger
    (PostgreSQL, SQLite): every finished row is counted once, by this or by the trigger.
    """
    prefix, jobs, _ = _names(table, schema)
    counts = f'{prefix}"{counts_table(table)}"'
    took = {
        "postgresql": "extract(epoch FROM finished_at - run_at)",
        "sqlite": "(julianday(finished_at) - julianday(run_at)) * 86400.0",
    }.get(dialect, "TIMESTAMPDIFF(MICROSECOND, run_at, finished_at) / 1e6")
    minute = {
        "postgresql": "date_bin('1 minute', finished_at, '1970-01-01 00:00:00+00')",
        "sqlite": "strftime('%Y-%m-%d %H:%M:00.000000', finished_at)",
    }.get(dialect, "CAST(DATE_FORMAT(finished_at, '%Y-%m-%d %H:%i:00') AS DATETIME(6))")
    sql = (
        f"INSERT INTO {counts} (minute, queue, kind, status, jobs, seconds, max_seconds)"
        f" SELECT {minute}, queue, kind, status, count(*),"
        f" coalesce(sum({took}), 0), coalesce(max({took}), 0)"
        f" FROM {jobs} WHERE status IN ({_FINISHED}) AND finished_at IS NOT NULL"
        f" GROUP BY {minute}, queue, kind, status"
    )
    if dialect in MYSQL:
        sql = sql.replace('"', "`")
    return sql


def add_counters(table: Table) -> tuple[Table, Table]:
    """Both counter tables in `table`'s `MetaData`, with the trigger made after the log.

    ``create_all`` makes the log after the jobs table (`Table.add_is_dependent_on`), then
    the trigger on the jobs table; ``drop_all`` removes the trigger with the log.
    """
    counts, ended = counts_table_for(table), ended_table_for(table)
    if ended.info.get("sa_jobqueue_ddl"):
        return counts, ended
    ended.info["sa_jobqueue_ddl"] = True
    ended.add_is_dependent_on(table)
    for dialect in ("postgresql", "sqlite", *MYSQL):
        for sql in counter_trigger_sql(dialect, table.name, table.schema):
            create = DDL(sql.replace("%", "%%"))  # type: ignore[no-untyped-call]
            event.listen(ended, "after_create", create.execute_if(dialect=dialect))
        for sql in drop_counter_trigger_sql(dialect, table.name, table.schema):
            drop = DDL(sql)  # type: ignore[no-untyped-call]
            event.listen(ended, "before_drop", drop.execute_if(dialect=dialect))
    return counts, ended
