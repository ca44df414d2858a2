"""Counters: every job that ends is logged once, `counters_compact` moves the log exactly,
and `counters_fold` folds old minutes into hours, keeping every total.

Run on every driver; read back through `statements.counted_by_kind` and plain reads.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Engine, func, insert, select

from sa_jobqueue import statements
from sa_jobqueue.dashboard.history import RANGES
from sa_jobqueue.driver import Driver
from sa_jobqueue.driver.protocol.counters import FOLD_AFTER
from sa_jobqueue.schema.counters import counts_table_for, ended_table_for
from tests.driver.conftest import OWNER, add, claim
from tests.support.models import Job

COUNTS = counts_table_for(Job.__table__)  # type: ignore[arg-type]
ENDED = ended_table_for(Job.__table__)  # type: ignore[arg-type]


def logged(engine: Engine) -> int:
    """Jobs in the log (a row may count several: a done statement logs its batch)."""
    with engine.connect() as conn:
        return int(conn.execute(select(func.coalesce(func.sum(ENDED.c.jobs), 0))).scalar_one())


def rows_of(engine: Engine, table: object) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())  # type: ignore[arg-type]


def counted(engine: Engine) -> dict[tuple[str, str, str], int]:
    with engine.connect() as conn:
        rows = conn.execute(statements.counted_by_kind(Job))
        return {(r.queue, r.kind, r.status): int(r.jobs) for r in rows}


def test_each_job_that_ends_is_logged_once_and_a_claim_or_a_stale_done_logs_nothing(
    db: Engine, driver: Driver
):
    add(db, 3)
    jobs = claim(db, driver, 3)
    assert logged(db) == 0  # a claim ends nothing
    with db.begin() as conn:
        driver.job_complete(conn, jobs, OWNER)
    with db.begin() as conn:
        driver.job_complete(conn, jobs, OWNER)  # stale: fenced out, nothing ends again
    assert logged(db) == 3
    assert counted(db) == {("default", "plain", "done"): 3}


def test_counters_compact_moves_exactly_the_rows_it_adds_in_batches(db: Engine, driver: Driver):
    add(db, 5)
    for job in claim(db, driver, 5):  # one done statement each: five rows in the log
        with db.begin() as conn:
            driver.job_complete(conn, [job], OWNER)
    with db.begin() as conn:
        assert driver.counters_compact(conn, 2) == 2
    assert (rows_of(db, ENDED), rows_of(db, COUNTS)) == (3, 1)
    assert counted(db) == {("default", "plain", "done"): 5}  # rollup + log: each once
    with db.begin() as conn:
        assert driver.counters_compact(conn, 10) == 3
        assert driver.counters_compact(conn, 10) == 0
    assert rows_of(db, ENDED) == 0
    with db.connect() as conn:
        jobs, longest = conn.execute(select(COUNTS.c.jobs, COUNTS.c.max_seconds)).one()
    assert jobs == 5
    assert longest >= 0


# The fold of old minutes into hours (`counters_fold`).

NOW = datetime.now(timezone.utc).replace(second=0, microsecond=0)
BEFORE = NOW - FOLD_AFTER
KEYS = [(q, k, s) for q in ("default", "mail") for k in ("a", "b") for s in ("done", "failed")]


def minute_rows(days: int = 10, step: int = 97) -> list[dict[str, Any]]:
    """Counter rows every `step` minutes over the last `days`, for each of `KEYS`."""
    rows = []
    for back in range(0, days * 1440, step):
        for n, (queue, kind, status) in enumerate(KEYS):
            rows.append(
                {
                    "minute": NOW - timedelta(minutes=back),
                    "queue": queue,
                    "kind": kind,
                    "status": status,
                    "jobs": 1 + (back + n) % 7,
                    "seconds": 0.25 * ((back + n) % 11),
                    "max_seconds": 0.1 * ((back * 3 + n) % 13),
                }
            )
    return rows


def rows_before(engine: Engine) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        query = select(COUNTS).where(COUNTS.c.minute < BEFORE).order_by(*COUNTS.primary_key)
        return [tuple(row) for row in conn.execute(query)]


def rows_since(engine: Engine) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        query = select(COUNTS).where(COUNTS.c.minute >= BEFORE).order_by(*COUNTS.primary_key)
        return [tuple(row) for row in conn.execute(query)]


def totals_before(engine: Engine) -> dict[tuple[str, str, str], tuple[int, float, float]]:
    """Per queue, kind and status over the folded range: jobs, seconds, largest max_seconds."""
    c = COUNTS.c
    query = (
        select(
            c.queue,
            c.kind,
            c.status,
            func.sum(c.jobs),
            func.sum(c.seconds),
            func.max(c.max_seconds),
        )
        .where(c.minute < BEFORE)
        .group_by(c.queue, c.kind, c.status)
    )
    with engine.connect() as conn:
        return {
            (r[0], r[1], r[2]): (int(r[3]), float(r[4]), float(r[5])) for r in conn.execute(query)
        }


def week_and_day(engine: Engine) -> list[list[tuple[Any, ...]]]:
    """What the dashboard's week and day charts read (`statements.counted_per_bucket`)."""
    charts = []
    with engine.connect() as conn:
        for chart in (RANGES["week"], RANGES["day"]):
            params = {
                "window": float(chart.window),
                "bucket": float(chart.bucket),
                "queue_name": None,
            }
            rows = conn.execute(statements.counted_per_bucket(Job), params)
            charts.append(sorted((r.bucket, r.status, int(r.jobs), r.max_seconds) for r in rows))
    return charts


def fold_all(engine: Engine, driver: Driver, limit: int) -> int:
    folded = 0
    for _ in range(100):  # a fold that never ends (rows folded into themselves) fails
        with engine.begin() as conn:
            n = driver.counters_fold(conn, BEFORE, limit)
        folded += n
        if n < limit:
            return folded
    raise AssertionError(f"still folding after {folded} rows")


def on_the_hour(at: datetime) -> bool:
    return (at.minute, at.second, at.microsecond) == (0, 0, 0)


def test_counters_fold_keeps_every_total_and_what_the_week_reads(db: Engine, driver: Driver):
    rows = minute_rows(days=9, step=13)
    with db.begin() as conn:
        conn.execute(insert(COUNTS), rows)
    totals, recent, charts = totals_before(db), rows_since(db), week_and_day(db)
    old = len(rows_before(db))
    on_hour = [r for r in rows_before(db) if on_the_hour(r[0].replace(tzinfo=timezone.utc))]
    assert on_hour  # rows already on an hour's start, some alone in their hour
    with db.begin() as conn:
        assert driver.counters_fold(conn, BEFORE, 50) == 50  # a batch: `limit` rows
    folded = fold_all(db, driver, 200)
    after = rows_before(db)
    assert 50 + folded == old - len(on_hour)  # every row folded but those on the hour
    assert all(on_the_hour(r[0].replace(tzinfo=timezone.utc)) for r in after)
    assert len(after) < old / 3
    assert _close(totals_before(db), totals)  # compared with a count over the rows
    assert rows_since(db) == recent  # the minutes the charts read: untouched
    assert week_and_day(db) == charts
    assert counted(db) == {
        key: sum(r["jobs"] for r in rows if (r["queue"], r["kind"], r["status"]) == key)
        for key in KEYS
    }


def _close(
    got: dict[Any, tuple[int, float, float]], want: dict[Any, tuple[int, float, float]]
) -> bool:
    assert got.keys() == want.keys()
    for key, (jobs, seconds, longest) in want.items():
        assert got[key][0] == jobs
        assert got[key][1] == pytest.approx(seconds)
        assert got[key][2] == pytest.approx(longest)
    return True


def test_counters_fold_leaves_rows_on_the_hour_alone_and_twice_changes_nothing(
    db: Engine, driver: Driver
):
    hour = (BEFORE - timedelta(days=1)).replace(minute=0)
    alone = (BEFORE - timedelta(days=2)).replace(minute=0)
    row = {"queue": "default", "kind": "a", "status": "done"}
    with db.begin() as conn:
        conn.execute(
            insert(COUNTS),
            [
                {**row, "minute": alone, "jobs": 4, "seconds": 2.0, "max_seconds": 1.0},
                {**row, "minute": hour, "jobs": 3, "seconds": 1.5, "max_seconds": 0.5},
                {
                    **row,
                    "minute": hour + timedelta(minutes=7),
                    "jobs": 2,
                    "seconds": 4.0,
                    "max_seconds": 3.0,
                },
                {
                    **row,
                    "minute": hour + timedelta(minutes=59),
                    "jobs": 1,
                    "seconds": 0.5,
                    "max_seconds": 0.5,
                },
            ],
        )
    assert fold_all(db, driver, 10) == 2
    expected = [
        (alone, "default", "a", "done", 4, 2.0, 1.0),
        (hour, "default", "a", "done", 6, 6.0, 3.0),
    ]
    assert [(r[0].replace(tzinfo=timezone.utc), *r[1:]) for r in rows_before(db)] == expected
    assert fold_all(db, driver, 10) == 0
    assert [(r[0].replace(tzinfo=timezone.utc), *r[1:]) for r in rows_before(db)] == expected


def test_counters_fold_loses_no_log_row_appended_meanwhile(db: Engine, driver: Driver):
    rows = minute_rows(days=9, step=241)
    with db.begin() as conn:
        conn.execute(insert(COUNTS), rows)
    with db.begin() as conn:
        assert driver.counters_fold(conn, BEFORE, 5) == 5
    late = {
        "queue": "mail",
        "kind": "b",
        "status": "failed",
        "jobs": 5,
        "seconds": 1.0,
        "max_seconds": 1.0,
    }
    with db.begin() as conn:  # a job that ended in a folded minute's hour, not compacted yet
        conn.execute(insert(ENDED), [{**late, "minute": BEFORE - timedelta(days=1, minutes=3)}])
    fold_all(db, driver, 5)
    want = {
        key: sum(r["jobs"] for r in rows if (r["queue"], r["kind"], r["status"]) == key)
        for key in KEYS
    }
    want[("mail", "b", "failed")] += 5
    assert counted(db) == want  # rollup + log: the log row counts once
    with db.begin() as conn:
        assert driver.counters_compact(conn) == 1
    fold_all(db, driver, 5)
    assert rows_of(db, ENDED) == 0
    assert counted(db) == want
    assert all(on_the_hour(r[0].replace(tzinfo=timezone.utc)) for r in rows_before(db))
