"""`make bench-startup`: import time of sa_jobqueue, and `sa-jobqueue worker` exec to first claim.

Usage: ``python bench/startup.py [--reps N] [--database-url URL]``. The server is
``--database-url``, else ``DATABASE_URL``, else a throwaway one; the run uses a
scratch database dropped afterwards.

- *import*: ``python -c "import sa_jobqueue.cli"`` minus ``python -c "pass"``, each
  the median of `--reps` fresh interpreters (what every `sa-jobqueue` command pays).
- *first claim*: one pending job is in the table; the clock starts just before the
  worker process is exec'd and stops when the job's row says ``running`` (read by a
  tight loop on another connection), so it includes interpreter start, imports, the
  engine's first connection, the start-up sweep and the first claim.

Target (issue: performance and scale): first claim under 300 ms on this machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from app import Job, jobs  # noqa: E402
from sqlalchemy import create_engine, select  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from sa_jobqueue import migration  # noqa: E402
from sa_jobqueue.testing import scratch_database, throwaway_postgres  # noqa: E402

TARGET_MS = 300.0


def interpreter_ms(code: str, reps: int) -> float:
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def first_claim_ms(url: str, reps: int) -> list[float]:
    engine = create_engine(url)
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(HERE)}
    times = []
    try:
        for _ in range(reps):
            with Session(engine) as session, session.begin():
                job_id = jobs.enqueue(session, "noop", {}).id
            with engine.connect() as conn:
                started = time.perf_counter()
                worker = subprocess.Popen(
                    [sys.executable, "-m", "sa_jobqueue.cli", "worker", "app:jobs"],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                try:
                    while True:
                        status = conn.execute(select(Job.status).where(Job.id == job_id)).scalar()
                        conn.rollback()
                        if status != "pending":
                            times.append((time.perf_counter() - started) * 1000)
                            break
                        if time.perf_counter() - started > 30:
                            raise RuntimeError("the worker did not claim within 30 s")
                finally:
                    worker.terminate()
                    worker.wait(30)
    finally:
        engine.dispose()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    bare = interpreter_ms("pass", args.reps)
    cli = interpreter_ms("import sa_jobqueue.cli", args.reps)
    print(f"python -c pass:                 {bare:7.1f} ms (median of {args.reps})")
    print(f"python -c 'import sa_jobqueue.cli': {cli:7.1f} ms -> import cost {cli - bare:.1f} ms")

    def measure(server: str) -> None:
        with scratch_database(server, prefix="sa_jobqueue_startup") as url:
            migration.upgrade(url)
            times = first_claim_ms(url, args.reps)
        median = statistics.median(times)
        verdict = "holds" if median < TARGET_MS else "does not hold"
        print(
            f"sa-jobqueue worker exec -> first claim: median {median:.0f} ms "
            f"(min {min(times):.0f}, max {max(times):.0f}); target < {TARGET_MS:.0f} ms: {verdict}"
        )

    if args.database_url:
        measure(args.database_url)
    else:
        with throwaway_postgres() as server:
            measure(server)
    load = os.getloadavg()
    print(f"load average while it ran: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
