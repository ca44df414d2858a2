"""Big tables of finished jobs for the drains beside them: today's layout and the archive's.

`history_database` yields a database whose ``jobs`` table holds N finished jobs over the
last ten days (97 % done, 2 % failed, 1 % cancelled, four queues, six kinds, as the
``dashboard`` scenario's table) and ``pending`` jobs scheduled 30 days ahead, spread over
the same four queues: none is due, so a drain of ``default`` claims none of them, while
a quarter of them sit in its own queue's part of the pending index, before which its due
jobs must be found. In the ``archive`` layout the N finished jobs are in
``jobs_archive`` instead (one partition per UTC day, as the archiver makes them, and two
ahead), and the jobs table holds only the pending ones.

The rows are written with ``INSERT ... SELECT generate_series`` (the counters' insert
trigger off, their rollup then filled by revision ``sajq_0012``'s one statement), then
``VACUUM ANALYZE`` (the machine's PostgreSQL runs with autovacuum off) and a
``CHECKPOINT``. With `keep`, the database is named after its layout and size, kept after
the run and reused by the next one (a marker table says it was built whole); otherwise it
is a scratch database dropped after.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from bench.support import raw
from bench.support.app import Job
from bench.support.database import scratch
from bench.support.timing import log
from sa_jobqueue import migration
from sa_jobqueue.schema.archive import LIBRARY_COLUMNS
from sa_jobqueue.schema.counters import backfill_sql
from sa_jobqueue.schema.naming import archive_partition_name
from sa_jobqueue.statements.archive import archive_create_partition

LAYOUTS = ("table", "archive")
QUEUES = "ARRAY['default', 'mail', 'pdf', 'crm']"
#: The kinds of the rows beside: ``own``, those the benchmark's worker runs (`bench.support.app`:
#: a table whose history is of its worker's kinds); ``others``, the dashboard scenario's six,
#: none of which the worker runs (the claim's ``kind IN (...)`` then looks rare to the
#: planner: see bench/drain-beside-results.md).
KINDS = {
    "own": "ARRAY['noop', 'noop_tx', 'noop', 'noop_tx', 'noop', 'noop_tx']",
    "others": "ARRAY['send_receipt', 'render_pdf', 'sync_crm', 'create_invoice', 'import_feed',"
    " 'ping']",
}
DAYS = 10

#: The columns of a finished row, and their values for row ``i`` of ``rows``.
FINISHED_COLUMNS = (
    "queue, kind, payload, status, attempts, max_attempts, run_at, locked_by, last_error,"
    " created_at, updated_at, finished_at"
)
FINISHED_VALUES = """
       ({queues})[1 + i % 4], ({kinds})[1 + i % 6],
       jsonb_build_object('order_id', i, 'customer', 'c' || (i % 1000)),
       CASE WHEN i % 100 < 2 THEN 'failed' WHEN i % 100 = 2 THEN 'cancelled' ELSE 'done' END,
       CASE WHEN i % 100 < 2 THEN 5 ELSE 1 END, 5,
       now() - make_interval(secs => i * {spread} + 3),
       'host-' || (i % 8) || ':' || (1000 + i % 8),
       CASE WHEN i % 100 < 2 THEN 'ValueError: bad order ' || i END,
       now() - make_interval(secs => i * {spread} + 5),
       now() - make_interval(secs => i * {spread}),
       now() - make_interval(secs => i * {spread})
"""

PENDING = """
INSERT INTO jobs (queue, kind, payload, status, run_at, created_at)
SELECT ({queues})[1 + i %% 4], ({kinds})[1 + i %% 6],
       jsonb_build_object('order_id', -i, 'customer', 'c' || (i %% 1000)), 'pending',
       now() + interval '30 days' + make_interval(secs => i %% 86400), now()
FROM generate_series(1, %(pending)s) AS i
"""


def sql(url: str, *statements: str, params: dict[str, object] | None = None) -> None:
    with psycopg.connect(raw.dsn(url), autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement, params)  # type: ignore[arg-type]


def _finished(rows: int, into: str, columns: str, kinds: str) -> str:
    values = FINISHED_VALUES.format(queues=QUEUES, kinds=KINDS[kinds], spread=DAYS * 86400 / rows)
    return f"INSERT INTO {into} ({columns}) SELECT {values} FROM generate_series(1, {rows}) AS i"


def make_partitions(url: str) -> None:
    """The archive's daily partitions over the ten days, and two ahead (as the archiver's)."""
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as conn:
            for day in range(-DAYS - 1, 3):
                low = today + timedelta(days=day)
                name = archive_partition_name("jobs", low.strftime("%y%m%d%H%M"))
                conn.execute(archive_create_partition(Job, name, low, low + timedelta(days=1)))
    finally:
        engine.dispose()


def build(url: str, layout: str, rows: int, pending: int, kinds: str = "own") -> float:
    """Fill the migrated database at `url` in `layout`; the seconds it took."""
    started = time.perf_counter()
    if layout == "table":
        sql(
            url,
            "ALTER TABLE jobs DISABLE TRIGGER sa_jobqueue_count_inserted",
            _finished(rows, "jobs", FINISHED_COLUMNS, kinds),
            "ALTER TABLE jobs ENABLE TRIGGER sa_jobqueue_count_inserted",
            backfill_sql("postgresql", "jobs"),
        )
    else:
        make_partitions(url)
        library = ", ".join(LIBRARY_COLUMNS)
        sql(  # written as jobs (their defaults), then moved whole, as the archiver would
            url,
            "ALTER TABLE jobs DISABLE TRIGGER sa_jobqueue_count_inserted",
            _finished(rows, "jobs", FINISHED_COLUMNS, kinds),
            "ALTER TABLE jobs ENABLE TRIGGER sa_jobqueue_count_inserted",
            f"INSERT INTO jobs_archive ({library}) SELECT {library} FROM jobs",
            "TRUNCATE jobs CASCADE",  # and its (empty) workflow edges and steps
        )
    pending_sql = PENDING.format(queues=QUEUES, kinds=KINDS[kinds])
    sql(url, pending_sql, params={"pending": pending})
    sql(url, "VACUUM ANALYZE", "CHECKPOINT")
    return time.perf_counter() - started


def sizes(url: str) -> dict[str, int]:
    """Bytes of the jobs table and of its archive (partitions, indexes and TOAST included)."""
    with psycopg.connect(raw.dsn(url), autocommit=True) as conn:
        found = {}
        for table in ("jobs", "jobs_archive"):
            row = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                " WHERE c.oid = %s::regclass OR c.oid IN"
                " (SELECT inhrelid FROM pg_inherits WHERE inhparent = %s::regclass)",
                (table, table),
            ).fetchone()
            found[table] = int(row[0]) if row else 0
    return found


@contextlib.contextmanager
def history_database(
    server_url: str, layout: str, rows: int, pending: int, *, keep: bool, kinds: str = "own"
) -> Iterator[str]:
    """A database in `layout` with `rows` finished and `pending` future jobs; its URL.

    `kinds`: a key of `KINDS`, the kinds of those rows.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
    if not keep:
        with scratch(server_url, prefix=f"sajq_beside_{layout}") as url:
            log(f"building {layout} layout: {rows:,} finished, {pending:,} pending ({kinds})")
            log(f"  built in {build(url, layout, rows, pending, kinds):.0f} s")
            yield url
        return
    name = f"sajq_beside_{layout}_{rows}_{pending}_{kinds}"
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(raw.dsn(server_url), autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    if exists:
        with psycopg.connect(raw.dsn(url), autocommit=True) as conn:
            built = conn.execute("SELECT to_regclass('bench_built') IS NOT NULL").fetchone()
        if built and built[0]:
            log(f"reusing {name} (kept by an earlier run; drop it with --drop-kept)")
            yield url
            return
    drop_kept(server_url, name)
    sql(server_url, f'CREATE DATABASE "{name}"')
    migration.upgrade(url)
    log(f"building {name}: {rows:,} finished, {pending:,} pending ({layout} layout)")
    seconds = build(url, layout, rows, pending, kinds)
    sql(url, "CREATE TABLE bench_built (seconds float)")
    sql(url, f"INSERT INTO bench_built VALUES ({seconds})")
    log(f"  built in {seconds:.0f} s; kept as {name}")
    yield url


#: What `history_database(keep=True)` names its databases; a running bench's scratch
#: databases (``sajq_beside_<layout>_<hex>``) never match, so `--drop-kept` spares them.
KEPT_NAMES = r"^sajq_beside_(table|archive)_[0-9]+_[0-9]+_[a-z]+$"


def drop_kept(server_url: str, name: str | None = None) -> list[str]:
    """Drop the kept database called `name`, or every kept one (`KEPT_NAMES`); their names."""
    with psycopg.connect(raw.dsn(server_url), autocommit=True) as admin:
        names = [
            row[0]
            for row in admin.execute(
                "SELECT datname FROM pg_database"
                " WHERE datname = %s OR (%s::text IS NULL AND datname ~ %s)",
                (name, name, KEPT_NAMES),
            ).fetchall()
        ]
        for found in names:
            admin.execute(f'DROP DATABASE IF EXISTS "{found}" WITH (FORCE)')  # type: ignore[arg-type]
    return names
