"""One peer queue's side of the ``peers`` scenario; runs in the peers' own virtualenv.

Usage: ``python bench/support/peer_drive.py PEER URL ACTION N CONCURRENCY``, PEER one of
``pgqueuer`` and ``procrastinate``, ACTION one of:

- ``install``: create the peer's schema in the (empty, scratch) database;
- ``fill``: enqueue N no-op jobs in batches (not timed);
- ``drain``: run the peer's worker in its "until empty" mode at CONCURRENCY; print
  ``{"rate": jobs/s, "done": N, "cpu_seconds": ..., "max_rss_kb": ...}``, the rate and
  this process's CPU (every thread) from just before the worker starts to its return,
  and the process's peak RSS since it started (``VmHWM``);
- ``enqueue``: N single-job enqueues, each its own transaction; print ``{"rate": ...}``;
- ``enqueue_tx`` (PGQueuer): the same, each inside an explicit ``conn.transaction()``;
- ``enqueue_many`` (PGQueuer): N jobs in batches of 1,000, one ``Queries.enqueue`` of
  lists each (its batch enqueue: one statement, autocommit); print ``{"rate": ...}``.

Each peer runs at its documented defaults except for the concurrency mapping that
`bench/scenarios/peers.py` documents. Imports nothing of sa_jobqueue: its virtualenv has none.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from datetime import timedelta


def _drained(done: int, started: float, cpu: float) -> dict[str, float]:
    """A drain's line: its rate and CPU since `started`/`cpu`, the process's peak RSS."""
    return {
        "rate": done / (time.perf_counter() - started),
        "done": done,
        "cpu_seconds": time.process_time() - cpu,
        "max_rss_kb": _peak_rss_kb(),
    }


def _peak_rss_kb() -> int:
    """This process's peak RSS since its exec (``VmHWM``; ``ru_maxrss`` would hold the
    parent's at the fork)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _conninfo(url: str) -> str:
    """A libpq URL from a SQLAlchemy one (``postgresql+psycopg://`` -> ``postgresql://``)."""
    scheme, _, rest = url.partition("://")
    return f"postgresql://{rest}" if scheme.startswith("postgresql") else url


async def pgqueuer(url: str, action: str, count: int, concurrency: int) -> dict[str, float]:
    import asyncpg
    from pgqueuer import QueueManager
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries
    from pgqueuer.types import QueueExecutionMode

    conn = await asyncpg.connect(_conninfo(url))
    try:
        queries = Queries(AsyncpgDriver(conn))
        if action == "install":
            await queries.install()
            return {}
        if action == "fill":
            for start in range(0, count, 1000):
                size = min(1000, count - start)
                await queries.enqueue(["noop"] * size, [None] * size, [0] * size)
            return {}
        if action == "enqueue":
            started = time.perf_counter()
            for _ in range(count):
                await queries.enqueue("noop", None)
            return {"rate": count / (time.perf_counter() - started)}
        if action == "enqueue_tx":
            # Inside a transaction of the caller's, as an enqueue beside an app's own
            # writes runs: BEGIN, the INSERT, COMMIT (three round trips, not one).
            started = time.perf_counter()
            for _ in range(count):
                async with conn.transaction():
                    await queries.enqueue("noop", None)
            return {"rate": count / (time.perf_counter() - started)}
        if action == "enqueue_many":
            started = time.perf_counter()
            for start in range(0, count, 1000):
                size = min(1000, count - start)
                await queries.enqueue(["noop"] * size, [None] * size, [0] * size)
            return {"rate": count / (time.perf_counter() - started)}
        manager = QueueManager(queries)
        done = 0

        @manager.entrypoint("noop")
        async def noop(job: object) -> None:
            nonlocal done
            done += 1

        # Concurrency C: fetch batches of C; at most 2C picked at once (its floor).
        started, cpu = time.perf_counter(), time.process_time()
        await manager.run(
            batch_size=concurrency,
            max_concurrent_tasks=2 * concurrency,
            mode=QueueExecutionMode.drain,
            dequeue_timeout=timedelta(seconds=1),
        )
        return _drained(done, started, cpu)
    finally:
        await conn.close()


async def procrastinate(url: str, action: str, count: int, concurrency: int) -> dict[str, float]:
    import procrastinate as p

    app = p.App(connector=p.PsycopgConnector(conninfo=_conninfo(url)))
    done = 0

    @app.task(name="noop")
    async def noop() -> None:
        nonlocal done
        done += 1

    async with app.open_async():
        if action == "install":
            await app.schema_manager.apply_schema_async()
            return {}
        if action == "fill":
            for start in range(0, count, 1000):
                size = min(1000, count - start)
                await noop.batch_defer_async(*[{} for _ in range(size)])
            return {}
        if action == "enqueue":
            started = time.perf_counter()
            for _ in range(count):
                await noop.defer_async()
            return {"rate": count / (time.perf_counter() - started)}
        started, cpu = time.perf_counter(), time.process_time()
        # Concurrency C: C concurrent sub-workers; wait=False returns once nothing is due.
        await app.run_worker_async(
            concurrency=concurrency, wait=False, install_signal_handlers=False
        )
        return _drained(done, started, cpu)


def main() -> None:
    peer, url, action, count, concurrency = sys.argv[1:6]
    logging.basicConfig(level=logging.WARNING)
    run = {"pgqueuer": pgqueuer, "procrastinate": procrastinate}[peer]
    result = asyncio.run(run(url, action, int(count), int(concurrency)))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
