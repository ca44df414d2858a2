"""Durable steps: three-step jobs/s at concurrency 8 beside a raw loop, DBOS and Celery; recovery.

Usage: ``python -m bench steps [--reps 3] [--jobs 2000] [--dbos-jobs 500] [--concurrency 8]
[--recover-reps 3] [--no-default-recovery] [--no-peers] [--baseline-src DIR ...]``.

Throughput: three-step no-op jobs per second at concurrency 8, each system on a scratch
database of its own on the same server, jobs enqueued before the clock starts; timed from
the first step's start to the last job's end. The repetitions interleave the systems
(rotating who goes first), so load hits all alike; the figure is the median.

* ``sa-jobqueue``: ``ctx.step`` three times in a lease-mode task, ``jobs.worker(engine,
  concurrency=8).drain()`` at its defaults (`bench/support/steps_drive.py`);
* ``raw``: the same fenced writes in plain psycopg, 8 threads of one autocommit connection
  each: claim one job, three fenced step inserts (each one committed statement), a fenced
  done. Target: sa-jobqueue at least 75 % of it;
* ``DBOS``: a workflow of three ``@DBOS.step`` calls on a DBOS queue with
  ``worker_concurrency=8`` and its defaults otherwise (its 1 s queue poll), its own
  database (`bench/support/steps_peer_drive.py`, in ``bench/out/steps-venv-VERSION``
  unless the ``bench`` extra has them). Target:
  sa-jobqueue at least 3x;
* ``Celery``: chains of three tasks on the machine's Redis (127.0.0.1:6379), a prefork
  worker ``-c 8`` at its defaults (not durable: a step's result is not recorded).
* ``baseline`` (with ``--baseline-src``, a checkout of earlier code, e.g. ``git archive
  <commit> | tar -x -C DIR``; repeat it for several): sa-jobqueue again on that code,
  interleaved, named after DIR: what each change to the steps' writes bought.

Recovery: a three-step job whose worker is killed (SIGKILL) during step 2; seconds from
the kill to the job ``done`` after a worker restarted at once, and how many times step 1
ran (target: once). sa-jobqueue at its defaults (5-minute lease, 30 s sweeps) once, and
with a 2 s lease and 0.5 s sweeps, and 1 s and 0.25 s (`--recover-reps` times each,
interleaved with DBOS's); DBOS at its defaults (it
recovers its executor's pending workflows at launch). Writes ``bench/steps-results.md``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path
from typing import Any

from bench import targets
from bench.support import pythons
from bench.support.database import Database
from bench.support.results import BENCH, command, write
from bench.support.timing import load, log
from sa_jobqueue.testing import scratch_database

VENV = BENCH / "out" / f"steps-venv-{pythons.version()}"
PACKAGES = ("dbos>=3.0", "celery[redis]>=5.3", "psycopg[binary]>=3.2")
PEER_DRIVE = BENCH / "support" / "steps_peer_drive.py"
DRIVE = BENCH / "support" / "steps_drive.py"
REDIS = "redis://127.0.0.1:6379/0"
QUICK = ["--reps", "1", "--jobs", "200", "--dbos-jobs", "24", "--recover-reps", "1"]
QUICK += ["--no-default-recovery"]
#: (lease seconds or None: the library's default, sweep interval) of the recovery cases.
SHORT = (2.0, 0.5)
SHORTER = (1.0, 0.25)
DEFAULT = (None, 30.0)
DBOS = (None, 0.0)  # DBOS has neither: it recovers its executor's workflows at launch
#: The targets that need DBOS: "not measured" with the reason where it does not install.
DBOS_TARGETS = (
    "42.3 three-step jobs / DBOS at concurrency 8",
    "42.3 recovery / DBOS's, lease 2 s",
    "40 recovery / DBOS's, each at its defaults",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--dbos-jobs", type=int, default=500, help="DBOS: ~8 jobs/s at 8")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--recover-reps", type=int, default=3)
    parser.add_argument(
        "--no-default-recovery", action="store_true", help="skip the 5-minute-lease recovery"
    )
    parser.add_argument("--no-peers", action="store_true", help="skip DBOS and Celery")
    parser.add_argument(
        "--baseline-src", type=Path, action="append", default=[], help="code to compare"
    )


def peers_python() -> Path | None:
    """The peers' interpreter: this one when DBOS and Celery import here (the ``bench``
    extra), else a virtualenv made (and they installed) once, one per Python; None if
    one of them does not install (`not_installed` names it)."""
    if all(importlib.util.find_spec(name) for name in ("dbos", "celery", "redis")):
        return Path(sys.executable)
    python = VENV / "bin" / "python"
    if not python.exists():
        venv.create(VENV, with_pip=True)
        install = [python, "-m", "pip", "install", "--quiet"]
        failed = [p for p in PACKAGES if subprocess.run([*install, p], check=False).returncode]
        (VENV / "not-installed.txt").write_text("".join(f"{p}\n" for p in failed))
    if not_installed():
        log(f"steps: {', '.join(not_installed())} did not install; measured without DBOS, Celery")
        return None
    return python


def not_installed() -> list[str]:
    """The peers' packages that did not install into `VENV` (on this Python)."""
    missing = VENV / "not-installed.txt"
    return missing.read_text().split() if missing.exists() else []


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def _env(src: Path | None = None, lease: float | None = None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(src or BENCH.parent))
    env.pop("SAJQ_BENCH_LEASE", None)
    if lease is not None:
        env["SAJQ_BENCH_LEASE"] = str(lease)
    return env


def _json(argv: list[Any], env: dict[str, str] | None = None) -> dict[str, Any]:
    done = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, env=env, timeout=1800
    )
    if done.returncode:
        raise RuntimeError(f"{argv[1:3]} failed: {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def throughput(
    who: str, server: str, args: argparse.Namespace, python: Path | None
) -> dict[str, Any]:
    """One repetition of `who`'s three-step jobs: ``rate`` per second (and worker CPU)."""
    c = args.concurrency
    if who == "celery":
        return _json([python, PEER_DRIVE, "celery", REDIS, args.jobs, c])
    with scratch_database(server, prefix="sajq_steps") as url:
        if who == "dbos":
            return _json([python, PEER_DRIVE, "dbos", _libpq(url), args.dbos_jobs, c])
        action = "raw" if who == "raw" else "ours"
        src = Path(who.removeprefix("baseline ")) if who.startswith("baseline ") else None
        return _json([sys.executable, DRIVE, action, url, args.jobs, c], _env(src))


def _marks(path: Path, what: str) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.startswith(f"{what} "))


def _wait(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


def recover(
    who: str, server: str, python: Path | None, setting: tuple[float | None, float]
) -> dict[str, float]:
    """A kill -9 during step 2, a restart at once: ``seconds`` to the job done, step-1 ``runs``.

    For sa-jobqueue also the lease ``left`` at the kill and when the job was claimed again
    (``reclaimed``), both seconds after the kill: what the recovery waited for.
    """
    import psycopg
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    lease, sweep = setting
    with scratch_database(server, prefix="sajq_steps") as url, tempfile.TemporaryDirectory() as tmp:
        marks = Path(tmp) / "marks"
        marks.touch()
        if who == "dbos":
            argv = [str(python), str(PEER_DRIVE), "dbos-recover", _libpq(url), str(marks)]
            start = [*argv, "first"], [*argv, "again"]
            env = None
            check = (
                "SELECT status = 'SUCCESS', NULL, NULL FROM dbos.workflow_status "
                "WHERE workflow_uuid = 'recover-1'"
            )
        else:
            from bench.support import steps_drive

            engine = create_engine(url)
            steps_drive.Base.metadata.create_all(engine)
            with Session(engine) as session, session.begin():
                job = steps_drive.jobs.enqueue(session, "recover_steps", {"marks": str(marks)})
                job_id = job.id
            engine.dispose()
            argv = [sys.executable, str(DRIVE), "worker", url, str(sweep)]
            start = argv, argv
            env = _env(lease=lease)
            check = (
                "SELECT status = 'done', attempts > 1, "
                f"extract(epoch FROM locked_until - now()) FROM jobs WHERE id = {job_id}"
            )
        figures: dict[str, float] = {}
        first = subprocess.Popen(start[0], env=env, stderr=subprocess.DEVNULL)
        try:
            _wait(lambda: _marks(marks, "two") >= 1, 120, f"{who}: step 2 started")
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()
        killed = time.monotonic()
        again = subprocess.Popen(start[1], env=env, stderr=subprocess.DEVNULL)
        try:
            with psycopg.connect(_libpq(url), autocommit=True) as conn:

                def finished() -> bool:
                    row = conn.execute(check).fetchone()  # type: ignore[arg-type]
                    if row is None:
                        return False
                    if row[2] is not None and "left" not in figures:
                        figures["left"] = float(row[2]) + time.monotonic() - killed
                    if row[1] and "reclaimed" not in figures:
                        figures["reclaimed"] = time.monotonic() - killed
                    return bool(row[0])

                _wait(finished, 900, f"{who}: the job done after the restart")
            figures["seconds"] = time.monotonic() - killed
        finally:
            again.send_signal(signal.SIGKILL)
            again.wait()
        figures["runs"] = _marks(marks, "one")
        return figures


def main(args: argparse.Namespace, db: Database) -> None:
    python = None if args.no_peers else peers_python()
    if python is None and not args.no_peers:
        for target in DBOS_TARGETS:
            targets.unmeasured(target, f"{not_installed()[0]} does not install")
    who_all = ["sa-jobqueue", "raw"]
    who_all += [f"baseline {src}" for src in args.baseline_src]
    who_all += ["dbos", "celery"] if python else []
    rates: dict[str, list[float]] = {who: [] for who in who_all}
    cpu: dict[str, list[float]] = {who: [] for who in who_all}
    loads: list[str] = []
    for rep in range(args.reps):
        order = who_all[rep % len(who_all) :] + who_all[: rep % len(who_all)]
        for who in order:
            figures = throughput(who, db.url, args, python)
            rates[who].append(float(figures["rate"]))
            if "cpu_us_per_job" in figures:
                cpu[who].append(float(figures["cpu_us_per_job"]))
            log(f"steps rep {rep + 1} {who}: {figures}")
        loads.append(load())
    one_round = [("sa-jobqueue", SHORT), ("sa-jobqueue", SHORTER)]
    one_round += [("dbos", DBOS)] if python else []
    cases = one_round * args.recover_reps  # interleaved
    if not args.no_default_recovery:
        cases.append(("sa-jobqueue", DEFAULT))
    recovered: dict[tuple[str, tuple[float | None, float]], list[dict[str, float]]] = {}
    for who, setting in cases:
        recovered.setdefault((who, setting), []).append(recover(who, db.url, python, setting))
        log(f"steps recovery {who} {setting}: {recovered[(who, setting)][-1]}")
        loads.append(load())

    def median(who: str) -> float:
        return statistics.median(rates[who])

    def cell(who: str) -> str:
        values = ", ".join(f"{r:,.1f}" for r in rates[who])
        return f"{median(who):,.1f} ({values})"

    def cpu_cell(who: str) -> str:
        if not cpu[who]:
            return "-"
        return f"{statistics.median(cpu[who]):,.0f} ({', '.join(f'{c:,.0f}' for c in cpu[who])})"

    ours = median("sa-jobqueue")
    rows = [
        f"| three-step jobs/s, concurrency {args.concurrency} | median (reps) "
        "| sa-jobqueue / it | worker CPU us per job |",
        "|---|---|---|---|",
        f"| sa-jobqueue ({args.jobs:,} jobs) | {cell('sa-jobqueue')} | 1.00x "
        f"| {cpu_cell('sa-jobqueue')} |",
    ]
    names = {
        "raw": f"raw fenced loop, same writes ({args.jobs:,} jobs)",
        **{
            f"baseline {src}": f"sa-jobqueue, the code in {src.name} ({args.jobs:,} jobs)"
            for src in args.baseline_src
        },
        "dbos": f"DBOS queue, its defaults ({args.dbos_jobs:,} jobs)",
        "celery": f"Celery chain of 3 on Redis, not durable ({args.jobs:,} jobs)",
    }
    for who in who_all[1:]:
        rows.append(f"| {names[who]} | {cell(who)} | {ours / median(who):.2f}x | {cpu_cell(who)} |")
    rows += [
        "",
        "| recovery after kill -9 in step 2, worker restarted at once | seconds to done, "
        "median (reps) | lease left at the kill | claimed again after | step-1 runs |",
        "|---|---|---|---|---|",
    ]
    label = {
        ("sa-jobqueue", SHORT): "sa-jobqueue, lease 2 s, sweep every 0.5 s",
        ("sa-jobqueue", SHORTER): "sa-jobqueue, lease 1 s, sweep every 0.25 s",
        ("sa-jobqueue", DEFAULT): "sa-jobqueue, defaults (lease 5 min, sweep every 30 s)",
        ("dbos", DBOS): "DBOS, defaults (recovers at launch)",
    }
    recovery: dict[str, float] = {}
    for key, samples in recovered.items():

        def of(name: str, samples: list[dict[str, float]] = samples) -> str:
            values = [f[name] for f in samples if name in f]
            return f"{statistics.median(values):.2f}" if values else "-"

        seconds = statistics.median(f["seconds"] for f in samples)
        recovery[label[key]] = seconds
        runs = sorted({int(f["runs"]) for f in samples})
        spread = ", ".join(f"{f['seconds']:.2f}" for f in samples)
        rows.append(
            f"| {label[key]} | {seconds:.2f} ({spread}) | {of('left')} | {of('reclaimed')} "
            f"| {runs} |"
        )
    verdicts = [
        targets.record(
            "42.3 three-step jobs / raw fenced loop at concurrency 8", ours / median("raw"), 0.75
        )
    ]
    if "dbos" in rates:
        verdicts.append(
            targets.record(
                "42.3 three-step jobs / DBOS at concurrency 8", ours / median("dbos"), 3.0
            )
        )
    ones = max((f["runs"] for samples in recovered.values() for f in samples), default=0)
    if recovered:
        verdicts.append(
            targets.record(
                "42.3 step-1 runs after kill -9 in step 2", ones, 1, unit="", at_most=True
            )
        )
    dbos = recovery.get(label[("dbos", DBOS)])
    if dbos:
        short = recovery.get(label[("sa-jobqueue", SHORT)])
        if short:
            verdicts.append(
                targets.record("42.3 recovery / DBOS's, lease 2 s", short / dbos, 1.0, at_most=True)
            )
        default = recovery.get(label[("sa-jobqueue", DEFAULT)])
        if default:
            verdicts.append(
                targets.record(
                    "40 recovery / DBOS's, each at its defaults", default / dbos, 1.0, at_most=True
                )
            )
    text = "\n".join(
        [
            "# Durable steps bench",
            "",
            f"`{command()}` ({os.cpu_count()} CPUs; load average after each repetition: "
            f"{'; '.join(loads)})",
            "",
            *rows,
            "",
            "Targets:",
            "",
            *(f"- {v}" for v in verdicts),
            "",
        ]
    )
    print(text)
    write(BENCH / "steps-results.md", text)
