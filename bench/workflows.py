"""Workflows: fan-out/fan-in and chains, against a plain drain of the same jobs in the same run.

Usage: ``python bench/workflows.py [--reps 3] [--children 10000] [--chain 1000]
[--baseline-src DIR] [--database-url URL]`` (``DATABASE_URL``, else a throwaway server).

* ``plain``: ``children + 1`` no-op jobs enqueued with ``enqueue_many``, drained by one
  worker (concurrency 8): the figure the others are compared with.
* ``fan-in``: a batch of ``children`` no-op jobs and one callback (``jobs.batch``),
  drained the same way. Target: at least 80 % of ``plain``'s rate.
* ``chain``: ``chain`` no-op jobs, each ``after=`` the previous one, run by one idle
  worker that listens: the hop is the time from one job's start to the next's
  (done, release, NOTIFY, claim). Target: p50 at most 5 ms.
* the worker's CPU per job (every thread of the drain's process, ``time.process_time``),
  far less sensitive to the machine's load than the rates.
* ``baseline``: with ``--baseline-src`` (a checkout of the commit before workflows,
  e.g. ``git archive <commit> | tar -x -C DIR``), ``plain`` again on that code, in
  the same run, interleaved: what the claim and done paths cost jobs without
  dependencies before and after.

Each case runs in a subprocess of its own on a scratch database (`create_all`), and
cases alternate repetition by repetition so they see the same load. Prints a
Markdown table and writes it to ``bench/workflows-results.md``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--children", type=int, default=10_000)
    parser.add_argument("--chain", type=int, default=1_000)
    parser.add_argument("--baseline-src", type=Path)
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(_one(args.one, args.database_url, args.children, args.chain)))
        return
    if not args.database_url:  # as `make bench`'s other scripts: a throwaway server
        from sa_jobqueue.testing import throwaway_postgres

        with throwaway_postgres() as url:
            args.database_url = url
            _run(args)
        return
    _run(args)


def _run(args: argparse.Namespace) -> None:
    cases = ["plain", "fan-in", "chain"] + (["baseline"] if args.baseline_src else [])
    figures: dict[str, list[dict[str, float]]] = {case: [] for case in cases}
    for rep in range(args.reps):
        for case in cases:
            env = dict(os.environ)
            if case == "baseline":
                env["PYTHONPATH"] = str(args.baseline_src)
            command = [sys.executable, __file__, "--one", case, "--database-url", args.database_url]
            command += ["--children", str(args.children), "--chain", str(args.chain)]
            out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
            figures[case].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"rep {rep + 1} {case}: {figures[case][-1]}", file=sys.stderr)

    def median(case: str, key: str) -> float:
        return statistics.median(f[key] for f in figures[case])

    def spread(case: str, key: str) -> str:
        values = [f[key] for f in figures[case]]
        return f"{min(values):,.1f}-{max(values):,.1f}"

    plain = median("plain", "rate")
    rows = [
        "| case | figure (median) | min-max | vs plain | target |",
        "|---|---|---|---|---|",
        f"| plain drain, {args.children + 1:,} jobs | {plain:,.0f} jobs/s "
        f"| {spread('plain', 'rate')} | 100 % | |",
        f"| fan-out/fan-in, {args.children:,} children + 1 callback "
        f"| {median('fan-in', 'rate'):,.0f} jobs/s | {spread('fan-in', 'rate')} "
        f"| {median('fan-in', 'rate') / plain:.0%} | >= 80 % |",
        f"| chain of {args.chain:,}, hop p50 | {median('chain', 'p50_ms'):.2f} ms "
        f"| {spread('chain', 'p50_ms')} | | <= 5 ms |",
        f"| chain of {args.chain:,}, hop p90 | {median('chain', 'p90_ms'):.2f} ms "
        f"| {spread('chain', 'p90_ms')} | | |",
    ]
    cpu = median("plain", "cpu_us_per_job")
    rows.append(
        f"| worker CPU per job, plain | {cpu:.1f} us | {spread('plain', 'cpu_us_per_job')} "
        "| 100 % | |"
    )
    fan_cpu = median("fan-in", "cpu_us_per_job")
    rows.append(
        f"| worker CPU per job, fan-out/fan-in | {fan_cpu:.1f} us "
        f"| {spread('fan-in', 'cpu_us_per_job')} | {fan_cpu / cpu:.0%} | |"
    )
    if args.baseline_src:
        base = median("baseline", "rate")
        rows.append(
            f"| plain drain before workflows (baseline code) | {base:,.0f} jobs/s "
            f"| {spread('baseline', 'rate')} | {base / plain:.0%} | plain >= baseline |"
        )
        base_cpu = median("baseline", "cpu_us_per_job")
        rows.append(
            f"| worker CPU per job before workflows | {base_cpu:.1f} us "
            f"| {spread('baseline', 'cpu_us_per_job')} | {base_cpu / cpu:.0%} "
            "| plain <= baseline |"
        )
    load = os.getloadavg()[0]
    table = "\n".join(rows)
    text = (
        f"# Workflows bench\n\n`python bench/workflows.py --reps {args.reps}` "
        f"(load average {load:.1f} at the end; {os.cpu_count()} CPUs)\n\n{table}\n"
    )
    print(text)
    (HERE / "workflows-results.md").write_text(text)


if __name__ == "__main__":
    main()
