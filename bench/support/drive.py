"""One worker process of the benchmark: drain the queue when told to, report as JSON.

Usage: ``python -m bench.support.drive URL CONCURRENCY [--rss-every SECONDS] [--savepoint-batch N]
[--queue NAME ...] [--count-claims] [--count-statements] [--time-statements] [--async-tasks]
[--prefetch N] [--expect-warning TEXT ...]``.
It builds its engine and worker, warms the connection, prints ``ready``, waits
for a line on stdin, drains until no job is due, and prints one JSON line:
``{"start": ..., "end": ..., "processed": ..., "warnings": ..., "cpu_seconds": ...,
"rss_start_kb": ..., "rss_end_kb": ..., "rss_peak_kb": ...}`` (times from
``time.monotonic()``, comparable across processes; ``cpu_seconds``: the process's CPU over
the drain; ``warnings`` counts the worker's warnings: a clean run has none).
With ``--count-claims`` the report also has ``claims``: claim statements run, rows
they returned, rows they asked for (``:limit``), how many returned fewer rows
than asked (``short``) or none (``empty``), and when the last rows came
(``last_rows_at``), seen from the client by an engine event. With ``--count-statements``
it has ``statements``: the statements, commits and rollbacks of the drain. With
``--time-statements`` it has ``statement_times``: per statement (its first 100 characters,
whitespace folded), ``[calls, seconds]`` from the client's execute to its return, over the
drain (`bench.support.statement_times` prints them).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import re
import sys
import threading
import time

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine

from bench.support.app import async_jobs, jobs


def rss_kb(field: str = "VmRSS") -> int:
    """This process's resident set now (`field` ``VmHWM``: its peak since it was started).

    Not ``ru_maxrss``: a process started by fork and exec keeps its parent's at the fork.
    """
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    return 0


class Count(logging.Handler):
    """Counts the worker's warnings: a clean run has none (no failed attempt, no DB error).

    A warning containing one of `expected` (a case that sets up what it warns of) is not
    counted.
    """

    def __init__(self, expected: tuple[str, ...] = ()) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        self.expected = expected

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if not any(text in message for text in self.expected):
            self.count += 1


def count_claims(engine: Engine) -> dict[str, float]:
    """Count the worker's claim statements (``FOR UPDATE SKIP LOCKED``) and their rows.

    ``last_rows_at`` is the ``time.monotonic()`` of the last claim that returned rows:
    the drain's tail (empty claims, the idle probes, the last acknowledgement) follows it.
    """
    counts: dict[str, float] = {"claims": 0, "rows": 0, "asked": 0, "short": 0, "empty": 0}
    counts["last_rows_at"] = 0.0

    @event.listens_for(engine, "after_cursor_execute")
    def seen(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        if "SKIP LOCKED" not in statement or not isinstance(parameters, dict):
            return
        asked = int(parameters.get("limit") or 0)
        rows = max(cursor.rowcount, 0)
        counts["claims"] += 1
        counts["rows"] += rows
        counts["asked"] += asked
        counts["short"] += rows < asked
        counts["empty"] += rows == 0
        if rows:
            counts["last_rows_at"] = time.monotonic()

    return counts


def count_statements() -> dict[str, int]:
    """Count every engine's statements, commits and rollbacks in this process.

    Listened for on the `Engine` class, so an engine the worker derives from ours (SQLite's
    ``BEGIN IMMEDIATE`` copy) is counted too.
    """
    counts = {"statements": 0, "commits": 0, "rollbacks": 0}

    def statement(*args: object) -> None:
        counts["statements"] += 1

    def commit(conn: object) -> None:
        counts["commits"] += 1

    def rollback(conn: object) -> None:
        counts["rollbacks"] += 1

    event.listen(Engine, "after_cursor_execute", statement)
    event.listen(Engine, "commit", commit)
    event.listen(Engine, "rollback", rollback)
    return counts


def time_statements(engine: Engine) -> dict[str, list[float]]:
    """Time every statement of every engine in this process: ``{shape: [calls, seconds]}``.

    The time is the client's, from the cursor's execute to its return (the round trip
    and the server's work; on SQLite the library's own). The COMMITs of `engine`'s
    dialect (the worker's engines share it) are timed too, as ``COMMIT``.
    """
    times: dict[str, list[float]] = {}
    dialect = engine.dialect
    commit = dialect.do_commit

    def timed_commit(dbapi_connection) -> None:
        started = time.perf_counter()
        commit(dbapi_connection)
        entry = times.setdefault("COMMIT", [0, 0.0])
        entry[0] += 1
        entry[1] += time.perf_counter() - started

    dialect.do_commit = timed_commit  # type: ignore[method-assign]

    def before(conn, cursor, statement, params, context, executemany) -> None:
        conn.info["bench_started"] = time.perf_counter()

    def after(conn, cursor, statement, params, context, executemany) -> None:
        took = time.perf_counter() - conn.info.pop("bench_started", time.perf_counter())
        entry = times.setdefault(re.sub(r"\s+", " ", statement)[:100], [0, 0.0])
        entry[0] += 1
        entry[1] += took

    event.listen(Engine, "before_cursor_execute", before)
    event.listen(Engine, "after_cursor_execute", after)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("concurrency", type=int)
    parser.add_argument("--rss-every", type=float, default=0.0)
    parser.add_argument("--savepoint-batch", type=int, default=1)
    parser.add_argument("--asynchronous-commit", action="store_true")
    parser.add_argument("--queue", action="append", default=[])
    parser.add_argument("--count-claims", action="store_true")
    parser.add_argument("--count-statements", action="store_true")
    parser.add_argument("--time-statements", action="store_true")
    parser.add_argument("--async-tasks", action="store_true", help="the async no-op's queue")
    parser.add_argument("--prefetch", type=int, default=None, help="the worker's prefetch")
    parser.add_argument(
        "--expect-warning", action="append", default=[], help="a warning's text not counted"
    )
    args = parser.parse_args()
    engine = create_engine(args.url, pool_size=args.concurrency + 4, max_overflow=4)
    options = {}
    if args.savepoint_batch > 1:
        options["savepoint_batch"] = args.savepoint_batch
    if args.asynchronous_commit:
        options["asynchronous_commit"] = True
    if args.queue:
        options["queues"] = args.queue
    if args.prefetch is not None:
        options["prefetch"] = args.prefetch
    claims = count_claims(engine) if args.count_claims else None
    statements = count_statements() if args.count_statements else None
    timed = time_statements(engine) if args.time_statements else None
    queue = async_jobs if args.async_tasks else jobs
    worker = queue.worker(engine, concurrency=args.concurrency, listen=False, **options)
    with engine.connect() as conn:  # open the pool's first connection before the clock starts
        conn.execute(text("SELECT 1"))
    gc.collect()
    samples: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(args.rss_every):
            samples.append(rss_kb())

    warnings = Count(tuple(args.expect_warning))
    logging.getLogger("sa_jobqueue").addHandler(warnings)
    print("ready", flush=True)
    sys.stdin.readline()
    if statements is not None:
        statements.update(dict.fromkeys(statements, 0))  # the warm-up is not the drain's
    if timed is not None:
        timed.clear()
    rss_start = rss_kb()
    if args.rss_every > 0:
        threading.Thread(target=sample, daemon=True).start()
    start, cpu = time.monotonic(), time.process_time()
    processed = worker.drain()
    end, cpu = time.monotonic(), time.process_time() - cpu
    stop.set()
    rss_end = rss_kb()
    report = {
        "start": start,
        "end": end,
        "processed": processed,
        "warnings": warnings.count,
        "cpu_seconds": cpu,
        "rss_start_kb": rss_start,
        "rss_end_kb": rss_end,
        "rss_peak_kb": max([rss_start, rss_end, *samples]),
        "rss_samples_kb": samples,
        # The process's peak over its life (imports, start, drain), as the kernel kept it.
        "max_rss_kb": rss_kb("VmHWM"),
    }
    if claims is not None:
        report["claims"] = claims
    if statements is not None:
        report["statements"] = statements
    if timed is not None:
        report["statement_times"] = timed
    print(json.dumps(report), flush=True)
    engine.dispose()


if __name__ == "__main__":
    main()
