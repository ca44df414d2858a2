"""One embedded peer's side of the ``databases`` scenario; runs in the peers' own virtualenv.

Usage: ``python bench/support/embedded_drive.py PEER PATH ACTION N CONCURRENCY [SPACING]``,
PEER one of ``huey`` (``SqliteHuey``) and ``dbos`` (DBOS on SQLite), PATH the SQLite file
(made on first use), ACTION one of:

- ``fill``: enqueue N no-op tasks, not timed (DBOS: through `DBOSClient`, so nothing runs);
- ``enqueue``: N single enqueues, each its own transaction; print ``{"rate": jobs/s}``;
- ``drain``: run the peer's consumer in this process at CONCURRENCY until the N tasks that
  ``fill`` left have run; print ``{"rate": jobs/s, "done": N, "cpu_seconds": ...,
  "max_rss_kb": ...}``, the rate and this process's CPU (every thread) from just before the
  consumer starts to the N-th task's end, and its peak RSS since it started (``VmHWM``);
- ``wake``: a consumer at concurrency 1 idles; N times, wait a random SPACING-bounded moment,
  enqueue one task and time until it starts; print ``{"latencies_ms": [...]}``.

Each runs at its documented defaults: huey's ``SqliteHuey(filename=PATH)`` (WAL) and its
consumer's thread workers (``workers=C``, polling from 0.1 s backing off x1.15 to 10 s);
DBOS with ``system_database_url`` the SQLite file and one queue registered with
``worker_concurrency=C`` (its 1 s queue poll). Imports nothing of sa_jobqueue.
"""

from __future__ import annotations

import json
import logging
import random
import sys
import threading
import time
from typing import Any

DONE = threading.Condition()
COUNT = [0]
LATENCIES: list[float] = []


def _ran(sent: float | None) -> None:
    """A task body: count it, and for a wake-up sample its latency."""
    now = time.time()
    with DONE:
        COUNT[0] += 1
        if sent is not None:
            LATENCIES.append((now - sent) * 1000)
        DONE.notify_all()


def _drained(count: int, started: float, cpu: float) -> dict[str, Any]:
    """A drain's line: its rate and CPU since `started`/`cpu`, and the peak RSS so far."""
    peak = 0
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):  # not ru_maxrss: that keeps the parent's at fork
                peak = int(line.split()[1])
    return {
        "rate": count / (time.perf_counter() - started),
        "done": COUNT[0],
        "cpu_seconds": time.process_time() - cpu,
        "max_rss_kb": peak,
    }


def _wait_for(count: int, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    with DONE:
        while COUNT[0] < count:
            if not DONE.wait(max(0.0, deadline - time.monotonic())):
                raise RuntimeError(f"{COUNT[0]} of {count} tasks ran within {timeout}s")


def huey(path: str, action: str, count: int, concurrency: int, spacing: float) -> dict[str, Any]:
    from huey import SqliteHuey

    app = SqliteHuey(filename=path)

    @app.task(name="noop")  # type: ignore[untyped-decorator]
    def noop(sent: float | None = None) -> None:
        _ran(sent)

    if action in ("fill", "enqueue"):
        started = time.perf_counter()
        for _ in range(count):
            noop()
        return {"rate": count / (time.perf_counter() - started)}
    consumer = app.create_consumer(workers=concurrency if action == "drain" else 1)
    if action == "drain":
        started, cpu = time.perf_counter(), time.process_time()
        consumer.start()
        _wait_for(count)
        drained = _drained(count, started, cpu)
        consumer.stop(graceful=True)
        return drained
    consumer.start()
    try:
        noop(time.time())  # warm up
        _wait_for(1)
        for n in range(count):
            time.sleep(random.uniform(0.02, spacing))
            noop(time.time())
            _wait_for(n + 2, 60.0)
        return {"latencies_ms": LATENCIES[1:]}
    finally:
        consumer.stop(graceful=True)


def dbos(path: str, action: str, count: int, concurrency: int, spacing: float) -> dict[str, Any]:
    from dbos import DBOS, DBOSClient

    url = f"sqlite:///{path}"
    options: Any = {"queue_name": "bench", "workflow_name": "noop"}
    if action in ("fill", "enqueue"):
        DBOS(config={"name": "bench", "system_database_url": url})
        DBOS.launch()  # creates the system tables; no queue of this name runs here
        client = DBOSClient(system_database_url=url)
        started = time.perf_counter()
        for _ in range(count):
            client.enqueue(options, None)
        rate = count / (time.perf_counter() - started)
        client.destroy()
        DBOS.destroy()
        return {"rate": rate}

    @DBOS.workflow(name="noop")  # type: ignore[untyped-decorator]
    def noop(sent: float | None) -> None:
        _ran(sent)

    DBOS(config={"name": "bench", "system_database_url": url})
    started, cpu = time.perf_counter(), time.process_time()
    DBOS.launch()  # the queue is registered (in the database) once DBOS runs
    queue = DBOS.register_queue("bench", worker_concurrency=concurrency if action == "drain" else 1)
    try:
        if action == "drain":
            _wait_for(count)
            return _drained(count, started, cpu)
        queue.enqueue(noop, time.time())  # warm up
        _wait_for(1)
        for n in range(count):
            time.sleep(random.uniform(0.02, spacing))
            queue.enqueue(noop, time.time())
            _wait_for(n + 2, 60.0)
        return {"latencies_ms": LATENCIES[1:]}
    finally:
        DBOS.destroy(destroy_registry=True)


def main() -> None:
    peer, path, action, count, concurrency = sys.argv[1:6]
    spacing = float(sys.argv[6]) if len(sys.argv) > 6 else 1.0
    logging.basicConfig(level=logging.WARNING)
    run = {"huey": huey, "dbos": dbos}[peer]
    result = run(path, action, int(count), int(concurrency), spacing)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
