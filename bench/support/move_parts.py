"""Where the archiver's move spends its time: the statement, and the statement without each part.

`measure` writes `count` done jobs (finished an hour ago, none with steps, attempt
history or dependents: a lease drain's no-op jobs) into an emptied jobs table, then runs
one batch of ``archive_move`` in a transaction rolled back after, so every variant moves
the same rows: as shipped, and with one part taken out of its SQL text at a time. Each
variant runs ``--reps`` times, interleaved, under ``EXPLAIN (ANALYZE, TIMING OFF)``; the
figure is the median execution time per job moved. The shipped statement's plan with
``BUFFERS`` and timing follows. Beside them: ``archive_oldest``, the probe the archiver
runs before each batch.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, text

from bench.support.app import Job
from bench.support.history import make_partitions
from sa_jobqueue.statements import archive as archive_sql

REPS = 5


def _without_history(sql: str) -> str:
    """The steps' and the attempt history's aggregates replaced by NULL (no CASE left)."""
    return re.sub(
        r"\(SELECT jsonb_agg\(.*?WHERE [se]\.job_id = m\.id\)", "NULL", _history_always(sql)
    )


def _without_columns(sql: str) -> str:
    """The app's own columns (``to_jsonb(m) - ARRAY[...]``) replaced by NULL."""
    return re.sub(r"nullif\(to_jsonb\(m\) - ARRAY\[[^\]]*\], '\{\}'::jsonb\)", "NULL", sql)


def _without_edges(sql: str) -> str:
    """The workflow check (``NOT EXISTS`` on the dependencies table) left out."""
    check = r" AND \(j\.has_dependents IS NOT TRUE OR NOT EXISTS \(SELECT 1 FROM .*? OFFSET 0\)\)"
    found = re.sub(check, "", sql, count=1)
    assert found != sql, "the workflow check's text changed: update this pattern"
    return found


def _history_always(sql: str) -> str:
    """The attempt history read for every job, as before its skip (``CASE WHEN`` removed)."""
    found = re.sub(
        r"CASE WHEN \(m\.attempts > 1 OR m\.status <> 'done'\) THEN (\(.*?\)) END", r"\1", sql
    )
    assert found != sql, "the history's skip changed: update this pattern"
    return found


def _delete_only(sql: str) -> str:
    """Only the lock and the DELETE: the rows are counted, not inserted anywhere."""
    return sql[: sql.index(" INSERT INTO")] + " SELECT count(*) FROM moved"


VARIANTS: dict[str, Callable[[str], str]] = {
    "as shipped": lambda sql: sql,
    "the history read for every job (before the skip)": _history_always,
    "without the steps' and history's jsonb_agg": _without_history,
    "without the app columns' to_jsonb": _without_columns,
    "without the workflow check (has_dependents, NOT EXISTS)": _without_edges,
    "without all three": lambda sql: _without_edges(_without_columns(_without_history(sql))),
    "the lock and DELETE alone (no INSERT)": _delete_only,
}


def _fill(engine: Engine, count: int) -> None:
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE jobs, jobs_archive RESTART IDENTITY CASCADE"))
        conn.execute(
            text(
                "INSERT INTO jobs (kind, status, attempts, payload, locked_by, finished_at)"
                " SELECT 'noop', 'done', 1, jsonb_build_object('n', n), 'bench',"
                " date_trunc('hour', now()) - interval '1 hour' + n * interval '1 ms'"
                " FROM generate_series(1, :n) AS n"
            ),
            {"n": count},
        )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE jobs"))


def _explain(conn: Any, sql: str, params: dict[str, Any], options: str) -> list[str]:
    transaction = conn.begin()
    try:
        conn.execute(archive_sql.lock_timeout_local())  # as the archiver's transaction: no JIT
        rows = conn.exec_driver_sql(f"EXPLAIN ({options}) {sql}", params).scalars().all()
    finally:
        transaction.rollback()
    return list(rows)


def _ms(plan: list[str]) -> float:
    line = next(row for row in plan if row.startswith("Execution Time"))
    return float(line.split(":")[1].split()[0])


def measure(engine: Engine, count: int, batch: int) -> list[str]:
    """The report's lines: µs per job of each variant of one batch, and the shipped plan."""
    url = engine.url.render_as_string(hide_password=False)
    make_partitions(url)
    _fill(engine, count)
    with engine.connect() as conn:
        now = conn.execute(text("SELECT now()")).scalar_one()
        low = now.replace(hour=0, minute=0, second=0, microsecond=0)
        if now - low < timedelta(hours=2):  # the rows finished yesterday (UTC)
            low -= timedelta(days=1)
        params: dict[str, Any] = {
            "before": now,
            "low": low,
            "high": low + timedelta(days=1),
            "limit": batch,
        }
        compiled = archive_sql.archive_move(Job).compile(dialect=conn.dialect)
        shipped = str(compiled)
        bound = compiled.construct_params(params)
        oldest = archive_sql.archive_oldest(Job).compile(dialect=conn.dialect)
        oldest_params = oldest.construct_params(params)
        conn.rollback()
        figures: dict[str, list[float]] = {name: [] for name in VARIANTS}
        figures["archive_oldest (before each batch)"] = []
        options = "ANALYZE, TIMING OFF, SUMMARY ON"
        for _ in range(REPS):
            for name, variant in VARIANTS.items():
                figures[name].append(_ms(_explain(conn, variant(shipped), bound, options)))
            plan = _explain(conn, str(oldest), oldest_params, options)
            figures["archive_oldest (before each batch)"].append(_ms(plan))
        plan = _explain(conn, shipped, bound, "ANALYZE, BUFFERS, VERBOSE OFF")
        oldest_plan = _explain(conn, str(oldest), oldest_params, "ANALYZE, BUFFERS")
    base = statistics.median(figures["as shipped"])
    lines = [
        f"### Where the move goes: one batch of {batch:,} of {count:,} done no-op jobs",
        "",
        f"Each variant in a transaction rolled back (the same rows each time), {REPS} runs "
        "interleaved, `EXPLAIN (ANALYZE, TIMING OFF)` execution time, median; "
        f"{datetime.now():%H:%M} (`bench/support/move_parts.py`).",
        "",
        "| variant | µs per job | vs as shipped |",
        "|---|---:|---:|",
    ]
    for name, times in figures.items():
        middle = statistics.median(times)
        lines.append(f"| {name} | {1000 * middle / batch:.1f} | {middle / base:.0%} |")
    lines += ["", "As shipped, `EXPLAIN (ANALYZE, BUFFERS)`:", "", "```", *plan, "```", ""]
    lines += ["`archive_oldest`:", "", "```", *oldest_plan, "```", ""]
    return lines
