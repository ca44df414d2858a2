"""What limits, workflows and durable steps cost jobs that use none of them, in instructions.

Usage: ``python -m bench features [--jobs N] [--base B]``.
Issue 30 item 8: "limits, workflows and durable steps cost nothing to kinds that use none of
them (a row per feature in the ratio table)". Each row enqueues and drains plain no-op
lease-mode jobs (``concurrency=1``, one process) under ``valgrind --tool=callgrind`` and
counts the instructions per job as the difference of a run of B + N jobs and one of B
(1,000 each), divided by N: start-up, set-up and the work a worker does once cancel out.
Each run first drains one warm-up job and claims nothing at every size a round can ask
(1, 2, 3, 5, ... up to concurrency + prefetch), so the claim statement of each ceiling is
built before the drain. Until 2026-12-06 the base run drained 0 jobs: once the PostgreSQL
driver built its statements on first use (a claim statement per ``claim_ceiling``, 24 M
instructions each; the done statements; the many-row insert; the next-due read) that
one-time work landed in the per-job figure, 24 k a job per claim statement, and which
ceilings a drain reaches follows the threads' timing: a row whose 0-job run happened to
build one fewer counted 24 k a job more (features-results.md, 2026-12-06). Work a feature
adds to every job still grows with N and shows; work it adds once cancels out. The rows
differ only in what else the worker and the table hold:

- *none*: the no-op task alone (the baseline);
- *limits*: three other tasks with ``max_running``, ``max_running_per_key`` and
  ``rate_limit`` (no jobs of theirs);
- *workflows*: 200 jobs in the table ``waiting`` on an upstream job that is never run;
- *durable*: a task of steps and a durable sleep, whose 200 jobs are parked (they ran
  once, recorded a step and went to sleep for an hour) before the plain drain.

The ratio to *none* is the feature's cost to jobs that do not use it; the target is
<= 1.02. The count of a threaded worker is not as steady as callgrind's name suggests: it
moves with wall-clock time. The interpreter asks the thread holding the GIL to hand it
over every 5 ms (`sys.getswitchinterval`), and the claim loop's batches (claims ahead, the
acknowledgements it coalesces for up to a few milliseconds) follow the threads' timing,
so a run slowed by a loaded machine counts more hand-overs and more, smaller rounds.
Three drains of 300 jobs counted 3,364 M and 3,311 M instructions (177 k a job apart) at
the default interval, and 3,297 M, 3,293 M and 3,308 M (49 k a job) with
``sys.setswitchinterval(1.0)``, which the measured process sets (the threads then trade
the GIL where they block). What is left follows the load: one pass over the four rows
while the test suite ran beside it, then without it, counted 685 k, 620 k, 547 k and
546 k a job, in run order. So the passes go there and back (none, limits, workflows,
durable, durable, workflows, limits, none), each a run of B jobs and one of B + N: each
row's two passes sit at the same mean position as none's, a load that drifts steadily
moves every row alike, and the table shows how far each row's two passes are apart (the
noise of all four runs: until 2026-12-06 one 0-job run per row served both, and its
noise showed in no column). Records each ratio in ``bench/targets.py``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench import targets
from bench.support import callgrind
from bench.support.database import Database, scratch

#: The measured process: one feature, one count of plain jobs.
CHILD = """
import sys
from datetime import timedelta
sys.setswitchinterval(1.0)  # threads trade the GIL where they block, not every 5 ms
sys.path.insert(0, {here!r})
from sqlalchemy import create_engine
from sqlalchemy.orm import Session
from app import Job
from sa_jobqueue import JobQueue

feature, n, url = sys.argv[1], int(sys.argv[2]), sys.argv[3]
engine = create_engine(url)
jobs = JobQueue(Job)
jobs.task("noop")(lambda ctx: None)
if feature == "limits":
    jobs.task("sync_crm", max_running=2)(lambda ctx: None)
    jobs.task("charge", max_running_per_key=1)(lambda ctx: None)
    jobs.task("call_api", rate_limit=(10, timedelta(seconds=1)))(lambda ctx: None)
elif feature == "workflows":
    with Session(engine) as s, s.begin():
        upstream = jobs.enqueue(s, "noop", queue="held")  # no worker claims queue "held"
        jobs.enqueue_many(s, [{{"kind": "noop", "after": [upstream]}} for _ in range(200)])
elif feature == "durable":
    @jobs.task("napper")
    def napper(ctx):
        ctx.step("charge", lambda: 1)
        ctx.sleep("cool_off", 3600)
    with Session(engine) as s, s.begin():
        jobs.enqueue_many(s, [("napper", {{}}) for _ in range(200)])
    parked = jobs.worker(engine, concurrency=1, listen=False, queues=["default"]).drain()
    assert parked == 200, parked
# Warm-up, alike in every run: one job drained, then an empty claim of every size a
# round can ask for (1, 2, 3, 5, 9, ... up to concurrency + prefetch), so the driver has
# built the claim statement of each ceiling it keeps (`plan_cache.claim_ceiling`) before
# the counted drain: which of them a drain reaches follows the threads' timing.
warm = jobs.worker(engine, concurrency=1, listen=False, queues=["default"])
with Session(engine) as s, s.begin():
    jobs.enqueue(s, "noop")
assert warm.drain() == 1
most = warm.config.concurrency + warm.config.prefetch
with warm.engine.begin() as conn:
    for limit in sorted({{1, most, *(2**k + 1 for k in range(most.bit_length()) if 2**k < most)}}):
        assert warm.driver.job_claim(conn, "default", limit, warm.worker_id) == []
with Session(engine) as s, s.begin():
    jobs.enqueue_many(s, [("noop", {{}}) for _ in range(n)])
done = jobs.worker(engine, concurrency=1, listen=False, queues=["default"]).drain()
assert done == n, (done, n)
engine.dispose()
"""

FEATURES = ("none", "limits", "workflows", "durable")
TARGET = 1.02
QUICK = ["--jobs", "50", "--base", "50"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--jobs", type=int, default=1000, help="plain jobs counted: the difference (1000)"
    )
    parser.add_argument(
        "--base", type=int, default=1000, help="plain jobs drained by the base run (1000)"
    )


def main(args: argparse.Namespace, db: Database) -> None:
    callgrind.require("features")
    began = time.monotonic()
    per_job: dict[str, float] = {}
    spread: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "child.py"
        script.write_text(CHILD.format(here=str(callgrind.SUPPORT)))
        server_url = db.url

        def count(feature: str, n: int) -> int:
            with scratch(server_url, "sajq_features") as url:
                return callgrind.instructions(script, feature, n, url, Path(tmp) / "child.out")

        # There and back (none, limits, workflows, durable, durable, ..., none), a run of
        # B jobs and one of B + N each time: each feature's two passes sit at the same
        # mean position as none's, so a load that drifts steadily through the run moves
        # every row alike, and the spread holds the noise of both runs of a pass.
        runs: dict[str, list[float]] = {feature: [] for feature in FEATURES}
        for feature in (*FEATURES, *reversed(FEATURES)):
            before = count(feature, args.base)
            after = count(feature, args.base + args.jobs)
            runs[feature].append((after - before) / args.jobs)
            print(f"  {feature}: {before:,} and {after:,} instructions", flush=True)
        for feature in FEATURES:
            per_job[feature] = sum(runs[feature]) / len(runs[feature])
            spread[feature] = abs(runs[feature][0] - runs[feature][1])
    minutes = (time.monotonic() - began) / 60
    print(
        f"\n`python -m bench features --jobs {args.jobs} --base {args.base}`, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {minutes:.1f} min, load "
        f"{os.getloadavg()[0]:.1f}: instructions per plain no-op job drained (callgrind)\n"
    )
    print("| beside | per job (mean of two passes) | the two passes apart | / none |")
    print("|---|---|---|---|")
    base = per_job["none"]
    for feature in FEATURES:
        print(
            f"| {feature} | {per_job[feature]:,.0f} | {spread[feature]:,.0f} "
            f"| {per_job[feature] / base:.3f}x |"
        )
    print()
    for feature in FEATURES[1:]:
        name = f"8 plain jobs beside {feature} / none (instructions)"
        print(targets.record(name, per_job[feature] / base, TARGET, at_most=True))
