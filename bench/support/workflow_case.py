"""One case of the ``workflows`` scenario, in a process of its own; prints one JSON line.

Usage: ``python bench/support/workflow_case.py CASE URL CHILDREN CHAIN``, CASE one of
``plain``, ``baseline`` (``plain`` on the code ``PYTHONPATH`` names), ``fan-in`` and
``chain`` (bench/scenarios/workflows.py says what each measures). Run by path, it imports
nothing of this checkout but `sa_jobqueue`, so a baseline's ``PYTHONPATH`` picks that.
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
import threading
import time


def _model():  # type: ignore[no-untyped-def]
    from sqlalchemy.orm import DeclarativeBase

    from sa_jobqueue import JobMixin, JobQueue

    class Base(DeclarativeBase):
        pass

    class Job(JobMixin, Base):
        __tablename__ = "jobs"

    return Base, Job, JobQueue(Job)


def _one(case: str, url: str, children: int, chain: int) -> dict[str, float]:
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from sa_jobqueue.testing import scratch_database

    base, _, jobs = _model()
    starts: list[float] = []
    jobs.task("noop")(lambda ctx: None)
    jobs.task("report")(lambda ctx: None)
    jobs.task("link")(lambda ctx: starts.append(time.perf_counter()))
    with scratch_database(url, prefix="sajq_bench_wf") as scratch:
        engine = create_engine(scratch, pool_size=12)
        base.metadata.create_all(engine)
        try:
            if case in ("plain", "baseline", "fan-in"):
                with Session(engine) as session, session.begin():
                    if case == "fan-in":
                        batch = jobs.batch(session, callback=("report", {}))
                        batch.enqueue_many([("noop", {"i": i}) for i in range(children)])
                    else:
                        jobs.enqueue_many(
                            session, [("noop", {"i": i}) for i in range(children + 1)]
                        )
                worker = jobs.worker(engine, concurrency=8, listen=False)
                began, cpu = time.perf_counter(), time.process_time()
                ran = worker.drain()
                seconds = time.perf_counter() - began
                cpu = time.process_time() - cpu
                assert ran == children + 1, ran
                # The worker's own CPU per job (every thread of this process): far less
                # sensitive to the machine's load than the wall-clock rate.
                return {"rate": ran / seconds, "cpu_us_per_job": cpu / ran * 1e6}
            worker = jobs.worker(engine, concurrency=1, poll_interval=5.0)
            thread = threading.Thread(target=worker.run, daemon=True)
            thread.start()
            time.sleep(1.0)  # idle and listening
            with Session(engine) as session, session.begin():
                previous = None
                for n in range(chain):
                    previous = jobs.enqueue(
                        session, "link", {"n": n}, after=[previous] if previous else None
                    )
            deadline = time.monotonic() + 600
            while len(starts) < chain and time.monotonic() < deadline:
                time.sleep(0.05)
            worker.stop()
            thread.join(30)
            hops = sorted((b - a) * 1000 for a, b in itertools.pairwise(starts))
            return {
                "p50_ms": statistics.median(hops),
                "p90_ms": hops[int(len(hops) * 0.9)],
                "rate": len(starts) / (starts[-1] - starts[0]),
            }
        finally:
            engine.dispose()


if __name__ == "__main__":
    case, url, children, chain = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps(_one(case, url, children, chain)))
