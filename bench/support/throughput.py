"""Throughput the scenarios share: drains by worker processes, enqueues, and raw SQL's."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import ModuleType

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from bench.support import raw, raw_mysql, raw_sqlite, timing
from bench.support.app import KINDS, jobs
from bench.support.workers import Workers, module_command


def raw_for(url: str) -> ModuleType:
    """The raw-SQL module of `url`'s database: `raw` (PostgreSQL), `raw_sqlite`, `raw_mysql`.

    Each has the same functions (``drain``, ``fill``, ``truncate``, ``count_done``,
    ``finish_all``, ``insert_rows``) in that database's own SQL and client.
    """
    scheme = url.split(":", 1)[0].split("+", 1)[0]
    if scheme == "sqlite":
        return raw_sqlite
    if scheme in ("mariadb", "mysql"):
        return raw_mysql
    return raw


def raw_drain(url: str, count: int, batch: int, processes: int = 1) -> float:
    """Jobs/s of the raw loop over `count` fresh jobs, `batch` claimed per transaction.

    With several `processes`, each runs the loop on a connection of its own
    (``bench.support.raw_drive``), timed from one ``go`` to the last one's end.
    """
    sql = raw_for(url)
    sql.truncate(url)
    sql.fill(url, "noop", count)
    if processes == 1:
        done, seconds = sql.drain(url, batch)
    else:
        command = module_command("bench.support.raw_drive", url, batch)
        with Workers([command] * processes) as workers:
            started = workers.go()
            reports = workers.reports(report_timeout=600)
        done = sum(r["processed"] for r in reports)
        seconds = max(r["end"] for r in reports) - started
    if done != count:
        raise RuntimeError(f"raw drain did {done} of {count} jobs")
    return float(done / seconds)


@dataclass
class DrainReport:
    rate: float
    rss_start_kb: int = 0
    rss_end_kb: int = 0
    rss_peak_kb: int = 0
    rss_samples_kb: list[int] = field(default_factory=list)
    #: With ``--count-statements`` in `extra_args`: every worker's statements, commits...
    statements: dict[str, int] = field(default_factory=dict)
    #: CPU seconds of every worker process over the drain (all its threads).
    cpu_seconds: float = 0.0
    #: With ``--time-statements`` in `extra_args`: every worker's ``{shape: [calls, s]}``.
    statement_times: dict[str, list[float]] = field(default_factory=dict)
    #: The first worker process's peak RSS over its life (``VmHWM``), KiB.
    max_rss_kb: int = 0
    #: With `postmaster`: the PostgreSQL server's CPU seconds over the drain (server-wide).
    server_cpu_seconds: float = 0.0


def add_times(into: dict[str, list[float]], times: dict[str, list[float]]) -> None:
    """Add `times` (``{statement: [calls, seconds]}``, `DrainReport.statement_times`) to `into`."""
    for statement, (calls, seconds) in times.items():
        entry = into.setdefault(statement, [0, 0.0])
        entry[0] += calls
        entry[1] += seconds


def library_drain(
    url: str,
    count: int,
    *,
    mode: str,
    processes: int,
    concurrency: int,
    savepoint_batch: int = 1,
    fresh: bool = True,
    rss_every: float = 0.0,
    extra_args: tuple[str, ...] = (),
    timeout: float | None = None,
    postmaster: int | None = None,
) -> DrainReport:
    """Drain `count` pre-enqueued no-op jobs with worker processes; time go -> last exit.

    `timeout`: seconds the workers have to report before the drain is a `RuntimeError`.
    `postmaster` (`timing.postmaster_of`): read the server's CPU from go to the reports.
    """
    sql = raw_for(url)
    if fresh:
        sql.truncate(url)
    before = sql.count_done(url)
    sql.fill(url, KINDS[mode], count)
    command = module_command("bench.support.drive", url, concurrency)
    command += ["--savepoint-batch", str(savepoint_batch), "--rss-every", str(rss_every)]
    command += list(extra_args)
    if mode == "async":
        command.append("--async-tasks")
    server_cpu = 0.0
    with Workers([command] * processes) as workers:
        if postmaster is not None:
            server_cpu = -timing.server_cpu_seconds(postmaster)
        started = workers.go()
        reports = workers.reports(report_timeout=timeout)
        if postmaster is not None:
            server_cpu += timing.server_cpu_seconds(postmaster)
    ended = max(r["end"] for r in reports)
    done = sql.count_done(url) - before
    if done != count or any(r["warnings"] for r in reports):
        warnings = sum(r["warnings"] for r in reports)
        if not fresh:  # leave no unfinished job behind for the next repetition
            sql.finish_all(url)
        raise RuntimeError(f"{mode} drain: {done} of {count} jobs done, {warnings} worker warnings")
    first = reports[0]
    statements: dict[str, int] = {}
    for r in reports:
        for key, value in r.get("statements", {}).items():
            statements[key] = statements.get(key, 0) + value
    times: dict[str, list[float]] = {}
    for r in reports:
        add_times(times, r.get("statement_times", {}))
    return DrainReport(
        count / (ended - started),
        first["rss_start_kb"],
        first["rss_end_kb"],
        first["rss_peak_kb"],
        first["rss_samples_kb"],
        statements,
        sum(r.get("cpu_seconds", 0.0) for r in reports),
        times,
        first.get("max_rss_kb", 0),
        server_cpu,
    )


def enqueue_single(url: str, count: int) -> float:
    """Jobs/s of `count` ``jobs.enqueue`` calls, each in its own Session transaction."""
    engine = create_engine(url)
    try:
        with Session(engine) as session, session.begin():
            jobs.enqueue(session, "noop", {"n": -1})  # warm the statement cache
        started = time.perf_counter()
        for i in range(count):
            with Session(engine) as session, session.begin():
                jobs.enqueue(session, "noop", {"n": i})
        return count / (time.perf_counter() - started)
    finally:
        engine.dispose()


def enqueue_many(url: str, batches: int, size: int, *, ids_only: bool = False) -> float:
    """Jobs/s of `enqueue_many` of `size` jobs per transaction (`ids_only`: ids back)."""
    engine = create_engine(url)
    try:
        with Session(engine) as session, session.begin():
            jobs.enqueue_many(session, [("noop", {"n": -1})], ids_only=ids_only)
        started = time.perf_counter()
        for b in range(batches):
            items = [("noop", {"n": b * size + i}) for i in range(size)]
            with Session(engine) as session, session.begin():
                jobs.enqueue_many(session, items, ids_only=ids_only)
        return batches * size / (time.perf_counter() - started)
    finally:
        engine.dispose()


def raw_insert(url: str, batches: int, size: int, form: str = "values") -> float:
    """Jobs/s of raw INSERTs: multi-row ``VALUES`` (any database), or ``"unnest"``/``"json"``."""
    if form == "values":
        count, seconds = raw_for(url).insert_rows(url, batches, size)
    else:
        count, seconds = raw.insert_arrays(url, batches, size, form=form)
    return float(count / seconds)
