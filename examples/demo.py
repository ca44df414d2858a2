"""`make demo`: the lesson "Building a job queue with Postgres", replayed by sa-jobqueue.

Real ``sa-jobqueue worker demo_app:jobs`` processes do the work; every table printed
is read back from the database at that moment. In the lesson's order:

* the seed: orders 1-3 (alice, bob, carol); jobs 1-3 pending; jobs 4 and 5
  running, their leases expired five minutes ago, job 5 at 3 of 3 attempts;
* leases: worker A's sweeper returns job 4 to ``pending`` and sends job 5 to
  ``failed`` (dead letter); worker B claims job 4 at attempt 2; job 4's first
  worker reports done late and changes nothing (fencing);
* exactly-once processing: worker A is killed with ``kill -9`` inside the invoice
  transaction of order 3; worker C writes that invoice, once;
* enqueue with your data: order 4 and its job commit together (and a rolled-back
  order leaves no job, at the end); LISTEN/NOTIFY wakes an idle worker at the commit;
* one event fanned out to three consumers, each retried on its own;
* beyond the lesson: retries with backoff into the dead letter, a job longer than
  its lease kept alive by heartbeats, and step 5's fence against a real worker
  stopped with SIGSTOP until its lease was swept, then woken to report done late.

Without DATABASE_URL it starts a throwaway PostgreSQL in a temporary directory;
with DATABASE_URL it recreates the database ``sa_jobqueue_demo`` on that server
(``--database NAME`` names another). Either way the database is left for
inspection (on a throwaway server, until you press Enter when the terminal is
interactive), with a hint for psql, the CLI and the dashboard. With
``--dashboard`` (``make demo-dashboard``) it plays in a uniquely named scratch
database instead, then serves ``sa-jobqueue dashboard`` on it (``--port``, default
8787) until Ctrl-C, and drops it afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, func, make_url, select, text
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sa_jobqueue import migration  # noqa: E402
from sa_jobqueue.driver.postgres import completion  # noqa: E402
from sa_jobqueue.schema.model import DEFAULT_MAX_ATTEMPTS  # noqa: E402
from sa_jobqueue.testing import scratch_database, throwaway_postgres  # noqa: E402

from demo_app import Base, Invoice, Job, Order, jobs  # noqa: E402

STARTED = time.monotonic()
DEMO_DATABASE = "sa_jobqueue_demo"
#: ``locked_by`` of the seed's two running jobs: workers that died ten minutes ago.
DEAD_WORKERS = {4: "old-worker-4", 5: "old-worker-5"}
POLL = "10"  # the workers' poll interval (s): anything quicker is a notification


def say(message: str) -> None:
    print(f"[{time.monotonic() - STARTED:4.1f}s] {message}", flush=True)


# -- printing, the lesson's way ------------------------------------------------------


def step(title: str) -> None:
    print(f"\n{title}", flush=True)


def note(message: str) -> None:
    print(f"  {message}", flush=True)


def show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Rows under their column names, aligned; "No rows" like the lesson for none."""
    if not rows:
        print("  No rows", flush=True)
        return
    cells = [[show(value) for value in row] for row in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    for row in [list(columns), *cells]:
        print("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    sys.stdout.flush()


def ago(value: Any) -> str:
    """A time relative to the database's ``now()``: ``now``, ``-10 min``, ``+2 s``."""
    if value is None:
        return "-"
    seconds = float(value)
    if abs(seconds) < 30:
        return "now"
    if abs(seconds) < 90:
        return f"{seconds:+.0f} s"
    return f"{seconds / 60:+.0f} min"


def relative(column: Any) -> Any:
    return func.extract("epoch", column - func.now())


# -- the database ----------------------------------------------------------------------


@contextlib.contextmanager
def database(name: str | None) -> Iterator[tuple[str, bool]]:
    """Yield the URL of database `name` (made afresh; None: a scratch one), and whether
    it outlives the demo."""
    server = os.environ.get("DATABASE_URL")
    with contextlib.ExitStack() as stack:
        if server:
            say("using $DATABASE_URL's server")
        else:
            say("no DATABASE_URL: starting a throwaway PostgreSQL")
            server = stack.enter_context(throwaway_postgres())
        if name is None:
            yield stack.enter_context(scratch_database(server, prefix=DEMO_DATABASE)), False
            return
        admin = create_engine(server, poolclass=NullPool, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:  # the previous run's database goes
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        url = make_url(server).set(database=name).render_as_string(hide_password=False)
        yield url, bool(os.environ.get("DATABASE_URL"))
        if not os.environ.get("DATABASE_URL"):
            keep_server_for_inspection(url)


def keep_server_for_inspection(url: str) -> None:
    """The throwaway server lives until Enter in a terminal; elsewhere it goes at once."""
    if sys.stdin.isatty():
        hints(url)
        with contextlib.suppress(EOFError, KeyboardInterrupt):
            input("\nPress Enter to stop the throwaway PostgreSQL (it is then removed). ")
    else:
        say("the throwaway PostgreSQL is removed (set DATABASE_URL to keep the demo's database)")


def hints(url: str) -> None:
    plain = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    cli = Path(sys.executable).with_name("sa-jobqueue")
    with contextlib.suppress(ValueError):
        cli = cli.relative_to(Path.cwd())
    print(f"\nThe demo's database is left for inspection ({make_url(url).database}):")
    query = "SELECT id, kind, status, attempts, max_attempts, last_error FROM jobs ORDER BY id"
    print(f"  psql:      psql {shlex.quote(plain)} -c {shlex.quote(query)}")
    print(f"  CLI:       {cli} jobs list --database-url {shlex.quote(url)}")
    print(
        f"  dashboard: {cli} dashboard --database-url {shlex.quote(url)}"
        "  (or make demo-dashboard: the demo again, then its dashboard)"
    )


# -- worker processes ------------------------------------------------------------------


class Worker:
    """An ``sa-jobqueue worker demo_app:jobs`` process, logging to a file."""

    def __init__(
        self, name: str, url: str, logs: Path, *options: str, env: dict[str, str] | None = None
    ) -> None:
        script = Path(sys.executable).with_name("sa-jobqueue")
        command = [str(script)] if script.exists() else [sys.executable, "-m", "sa_jobqueue.cli"]
        self.name = name
        self.log_path = logs / f"worker-{name}.log"
        self._log = self.log_path.open("w")
        argv = ["worker", "demo_app:jobs", "--poll-interval", POLL, *options]
        self.process = subprocess.Popen(
            [*command, *argv],
            cwd=HERE,  # the CLI imports demo_app from the current directory
            env={**os.environ, "DATABASE_URL": url, **(env or {})},
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.wait_for(" started: ")
        prefix = "".join(f"{key}={value} " for key, value in (env or {}).items())
        say(f"worker {name} started (pid {self.pid}): {prefix}sa-jobqueue {' '.join(argv)}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text()

    def wait_for(self, text: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"worker {self.name} failed:\n{self.log()}")
            time.sleep(0.05)

    def events(self, job_id: int, *words: str) -> None:
        """Print this worker's log lines about job `job_id` (those with one of `words`)."""
        for line in self.log().splitlines():
            message = line.split(": ", 1)[-1]
            if message.startswith(f"job {job_id} ") and any(w in message for w in words):
                note(f"worker {self.name} logged: {message}")

    def said(self, text: str) -> None:
        """Print this worker's log lines that hold `text`."""
        for line in self.log().splitlines():
            if text in line:
                note(f"worker {self.name} logged: {line.split(': ', 1)[-1]}")

    def stop(self, sig: signal.Signals) -> int:
        self.process.send_signal(sig)
        code = self.process.wait(30)
        self._log.close()
        return code


class Demo:
    """The lesson's steps against one database, with the workers it starts."""

    def __init__(self, url: str, logs: Path) -> None:
        self.url = url
        self.logs = logs
        self.engine = create_engine(url)
        self.workers: dict[str, Worker] = {}
        #: What a step saw, checked at the end: a wrong outcome fails the demo.
        self.observed: dict[str, bool] = {}

    # -- reading the database back --

    def rows(self, statement: Any) -> list[Any]:
        with Session(self.engine) as session:
            return list(session.execute(statement))

    def jobs(self, *where: Any) -> list[Job]:
        with Session(self.engine) as session:
            return list(session.scalars(select(Job).where(*where).order_by(Job.id)))

    def job(self, job_id: int) -> Job:
        with Session(self.engine, expire_on_commit=False) as session:
            return session.get_one(Job, job_id)

    def who(self, locked_by: str | None) -> str | None:
        """``locked_by`` as the demo's name for that worker (``B``), when it is one of ours."""
        for worker in self.workers.values():
            if locked_by and f":{worker.pid}:" in locked_by:
                return worker.name
        return locked_by

    def wait_until(
        self, what: str, check: Callable[[], bool], timeout: float = 40, *, fail: bool = True
    ) -> bool:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                if fail:
                    raise SystemExit(f"timed out waiting for {what}")
                return False
            time.sleep(0.02)
        return True

    def settled(self, *ids: int) -> bool:
        rows = self.rows(select(Job.status).where(Job.id.in_(ids)))
        return len(rows) == len(ids) and all(row.status in ("done", "failed") for row in rows)

    def start(self, name: str, *options: str, env: dict[str, str] | None = None) -> Worker:
        worker = Worker(name, self.url, self.logs, *options, env=env)
        self.workers[name] = worker
        return worker

    def job_rows(self, columns: Sequence[str], ids: Sequence[int]) -> None:
        """The lesson's table of `columns` for jobs `ids`, read now."""
        found = {job.id: job for job in self.jobs(Job.id.in_(ids))}
        rows = []
        for job_id in ids:
            job = found[job_id]
            values = {
                "id": job.id,
                "kind": job.kind,
                "payload": job.payload,
                "status": job.status,
                "attempts": job.attempts,
                "locked_by": self.who(job.locked_by),
                "last_error": (job.last_error or "").split("\n", 1)[0][:60] or None,
            }
            rows.append([values[c] for c in columns])
        table(columns, rows)

    # -- the lesson --

    def migrate(self) -> None:
        migration.upgrade(self.url)
        own = [Base.metadata.tables[name] for name in ("orders", "invoices")]
        Base.metadata.create_all(self.engine, tables=own)
        say("migrated: jobs (the shipped Alembic revisions), orders and invoices (create_all)")

    def seed(self) -> None:
        step("The seed")
        with Session(self.engine) as session, session.begin():
            session.add_all(
                [
                    Order(id=1, customer="alice", total_cents=4200),
                    Order(id=2, customer="bob", total_cents=1500),
                    Order(id=3, customer="carol", total_cents=9900),
                ]
            )
            session.flush()
            # Three jobs waiting to run.
            jobs.enqueue(session, "send_receipt", {"order_id": 1})
            jobs.enqueue(session, "send_receipt", {"order_id": 2})
            jobs.enqueue(session, "create_invoice", {"order_id": 3})
            # Two jobs whose workers died ten minutes ago, so their leases have expired:
            # plain rows of the model, as the lesson's INSERT writes them.
            for job_id, kind, payload, attempts, max_attempts in [
                (4, "send_receipt", {"order_id": 3}, 1, DEFAULT_MAX_ATTEMPTS),
                (5, "sync_crm", {"customer": "carol"}, 3, 3),
            ]:
                task = jobs.get_task(kind)
                assert task is not None
                session.add(
                    Job(
                        kind=kind,
                        queue=task.queue,
                        payload=payload,
                        status="running",
                        attempts=attempts,
                        max_attempts=max_attempts,
                        run_at=func.now() - timedelta(minutes=10),
                        locked_until=func.now() - timedelta(minutes=5),
                        locked_by=DEAD_WORKERS[job_id],
                    )
                )
                session.flush()
        orders = self.rows(select(Order.id, Order.customer, Order.total_cents).order_by(Order.id))
        table(["id", "customer", "total_cents"], orders)
        print()
        seeded = self.rows(
            select(
                Job.id,
                Job.kind,
                Job.payload,
                Job.status,
                Job.attempts,
                Job.max_attempts,
                relative(Job.run_at),
                relative(Job.locked_until),
                Job.locked_by,
            ).order_by(Job.id)
        )
        table(
            ["id", "kind", "payload", "status", "attempts", "run_at", "locked_until", "locked_by"],
            [
                [
                    *(r.id, r.kind, r.payload, r.status, f"{r.attempts}/{r.max_attempts}"),
                    *(ago(r[6]), ago(r[7]), r.locked_by),
                ]
                for r in seeded
            ],
        )
        default = DEFAULT_MAX_ATTEMPTS
        note(f"attempts N/M: claimed N times of max_attempts M. 1/{default}: once, of")
        note(f"sa-jobqueue's default max_attempts, {default} (the lesson's column says 3).")
        note("Job 5 was seeded with max_attempts 3, as in the lesson: 3/3, none left.")

    def leases(self) -> None:
        step("Leases, step 2: which running jobs have an expired lease?")
        table(
            ["id", "kind", "attempts", "lease_expired"],
            self.rows(
                select(Job.id, Job.kind, Job.attempts, Job.locked_until < func.now())
                .where(Job.status == "running")
                .order_by(Job.id)
            ),
        )
        note("(No job 1 here: in sa-jobqueue a worker sweeps expired leases before it claims.)")

        step("Leases, step 3: reclaim the expired leases (worker A's sweeper, at its start)")
        a = self.start(
            "A", "--queue", "billing", "--concurrency", "1", env={"DEMO_HANG_IN_INVOICE": "1"}
        )
        self.wait_until(
            "the sweep of jobs 4 and 5",
            lambda: (self.job(4).status, self.job(5).status) == ("pending", "failed"),
        )
        self.job_rows(["id", "kind", "status", "attempts", "last_error"], [4, 5])
        self.observed["the sweep: job 4 pending at 1, job 5 failed at 3/3"] = (
            self.job(4).attempts == 1 and self.job(5).attempts == 3
        )
        a.events(4, "lease expired")
        a.events(5, "lease expired")
        note("Job 4 is retried. Job 5 is out of attempts: it goes to 'failed', the dead letter.")

        step("Leases, step 4: worker B claims a job")
        b = self.start("B", "--queue", "mail", "--concurrency", "1", "--prefetch", "0")
        self.wait_until("job 4's second claim", lambda: self.job(4).attempts == 2)
        self.job_rows(["id", "kind", "payload", "attempts", "status", "locked_by"], [4])
        self.observed["job 4 claimed next at attempt 2"] = self.who(self.job(4).locked_by) == "B"
        note("Attempt 2 of job 4: the counter survived the crash. It comes before jobs 1 and 2:")
        note("claims go by run_at, and the sweep kept job 4's, ten minutes ago.")

        step("Leases, step 5: job 4's original worker wakes up and reports it done")
        owner = DEAD_WORKERS[4]
        late = {"job_id": 4, "attempt": 1, "owner": owner, "result": None}
        note("The fenced done every worker sends (sa_jobqueue.driver.postgres.completion):")
        note("UPDATE jobs SET status = 'done', ... WHERE id = 4 AND attempts = 1")
        note(f"  AND locked_by = '{owner}' AND status = 'running' RETURNING id, attempts")
        with self.engine.begin() as conn:
            reported = list(conn.execute(completion.complete_one(Job), late))
        table(["id", "attempts"], reported)
        note("Job 4, read back:")
        self.job_rows(["id", "kind", "attempts", "status", "locked_by"], [4])
        job = self.job(4)
        self.observed["job 4's late done (attempt 1) changed nothing"] = not reported and (
            job.attempts == 2 and self.who(job.locked_by) == "B"
        )
        note(f"Job 4's first worker ({owner}) was only slow: attempt 1 no longer matches,")
        note("so its done changed nothing and worker B's claim stands.")

        step("Leases, step 6: worker B reports its jobs done")
        self.wait_until("worker B's receipts", lambda: self.settled(1, 2, 4))
        self.job_rows(["id", "kind", "status", "attempts", "locked_by"], [1, 2, 4])
        b.events(4, "done")

    def exactly_once(self) -> None:
        a = self.workers["A"]
        step("Exactly-once processing, steps 1-2: worker A claims the invoice job and writes it")
        a.wait_for("invoice of order 3 written, not committed yet")
        self.job_rows(["id", "kind", "payload", "attempts", "status", "locked_by"], [3])
        a.events(3, "claimed")
        a.said("invoice of order 3 written")
        note("Invoices for order 3, seen from another session (the invoice is not committed):")
        table(["order_id", "total_cents"], self.invoices(3))

        step("Exactly-once processing, step 3: worker A crashes before committing")
        code = a.stop(signal.SIGKILL)
        say(f"kill -9 worker A (pid {a.pid}, exit {code}) inside the invoice's transaction")
        note("Invoices for order 3:")
        table(["order_id", "total_cents"], self.invoices(3))
        self.observed["no invoice for order 3 after the crash"] = not self.invoices(3)
        self.job_rows(["id", "kind", "attempts", "status", "locked_by"], [3])
        note("The invoice is rolled back with the crash.")
        self.wait_until("job 3 back to pending", lambda: self.job(3).status == "pending")
        self.job_rows(["id", "kind", "attempts", "status", "locked_by"], [3])
        self.workers["B"].events(3, "lease expired")
        note("Worker B, on the same host, found worker A's liveness file unlocked (the kernel")
        note("releases a dead process's lock): A's lease ended at once, its attempt counted.")
        note("Seen from another host, job 3 would have waited for its 3 s lease.")

        step("Exactly-once processing, steps 4-6: worker C claims the invoice job, writes, commits")
        queues = ["--queue", "mail", "--queue", "billing", "--queue", "default"]
        c = self.start("C", *queues, "--concurrency", "2", "--sweep-interval", "0.5")
        self.wait_until("the invoice job's second attempt", lambda: self.settled(3))
        self.job_rows(["id", "kind", "attempts", "status", "locked_by"], [3])
        c.events(3, "claimed", "done")
        note("Attempt 2 where the lesson shows 1: sa-jobqueue commits the claim before the")
        note("handler's transaction (a lease), so the crash cannot roll the counter back.")

        step("Exactly-once processing, step 7: how many invoices for order 3?")
        table(
            ["order_id", "total_cents", "job_status"],
            self.rows(
                select(Invoice.order_id, Invoice.total_cents, Job.status.label("job_status"))
                .join(Job, Job.id == 3)
                .where(Invoice.order_id == 3)
            ),
        )
        note("Delivered twice, invoiced once.")

    def invoices(self, order_id: int) -> list[Any]:
        return self.rows(
            select(Invoice.order_id, Invoice.total_cents).where(Invoice.order_id == order_id)
        )

    def enqueue_with_data(self) -> None:
        step("Enqueue with your data: order 4 and its job, in one transaction")
        with Session(self.engine) as session, session.begin():
            session.add(Order(id=4, customer="dave", total_cents=2500))
            job = jobs.enqueue(session, "send_receipt", {"order_id": 4})
            job_id = job.id
        committed = time.monotonic()
        together = self.rows(
            select(Order.id, Order.customer, Order.total_cents, Job.id, Job.kind, Job.payload)
            .join(Job, Job.payload["order_id"].as_integer() == Order.id)
            .where(Order.id == 4, Job.id == job_id)
        )
        table(["order_id", "customer", "total_cents", "job_id", "kind", "payload"], together)
        self.observed["order 4 and its job committed together"] = len(together) == 1
        note("No order without its job, no job without its order (the rollback half: at the end).")

        step("LISTEN / NOTIFY: the commit wakes an idle worker")
        self.wait_until("job 6's claim", lambda: self.job(job_id).status != "pending", 30)
        claimed_after = time.monotonic() - committed
        self.wait_until("job 6", lambda: self.settled(job_id))
        self.job_rows(["id", "kind", "status", "attempts", "locked_by"], [job_id])
        after = f"{claimed_after * 1000:.0f} ms"
        note(f"Job {job_id} left 'pending' {after} after its COMMIT. The workers poll only")
        note(f"every {POLL} s: the NOTIFY sent at the commit woke them.")

    def fan_out(self) -> list[int]:
        step("One event, many consumers: one job per consumer for order 4")
        with Session(self.engine) as session, session.begin():
            copies = jobs.enqueue_many(session, [(kind, {"order_id": 4}) for kind in CONSUMERS])
            ids = [job.id for job in copies]
        self.wait_until("the three consumers", lambda: self.settled(*ids))
        self.job_rows(["id", "kind", "status", "attempts", "last_error"], ids)
        note("Each copy is claimed, retried and failed on its own: sync_crm timed out on attempt 1")
        note("and ran again after its backoff; the receipt and the invoice did not wait for it.")
        note("(A second receipt for order 4, as in the lesson's fan-out; an app would give each")
        note("consumer its own kind, or dedupe with an idempotency_key.)")
        return ids

    def beyond(self) -> list[int]:
        step("Beyond the lesson: retries with backoff into the dead letter, and a long job")
        self.start("D", "--queue", "slow", "--concurrency", "1")
        with Session(self.engine) as session, session.begin():
            pdf = jobs.enqueue(session, "render_pdf", {"order_id": 2})
            feed = jobs.enqueue(session, "import_feed", {"url": "ftp://legacy/feed.xml"})
            ids = [pdf.id, feed.id]
        self.wait_until("render_pdf and import_feed", lambda: self.settled(*ids))
        self.job_rows(["id", "kind", "status", "attempts", "last_error"], ids)
        note("render_pdf ran 3 s on a 2 s lease: heartbeats kept it (attempt 1, never swept).")
        note("import_feed failed 3 of 3 attempts, 0.5 s then 1 s apart: dead letter, error kept.")
        return ids

    def stalled_worker(self) -> int:
        step("Beyond the lesson: the fence of step 5, against a real stalled worker")
        d = self.workers["D"]
        with Session(self.engine) as session, session.begin():
            job_id = jobs.enqueue(session, "render_pdf", {"order_id": 3}).id
        self.wait_until("worker D's claim", lambda: self.who(self.job(job_id).locked_by) == "D")
        # Claimed is not started: stopped before its handler began, D would give the job
        # back unstarted when it resumes (it waited too long for its slot), not report late.
        d.wait_for("rendering the PDF of order 3")

        def swept() -> bool:
            return self.job(job_id).status == "pending"

        for _ in range(5):
            d.process.send_signal(signal.SIGSTOP)
            say(f"SIGSTOP worker D (pid {d.pid}) in the middle of job {job_id}: no heartbeats")
            # Stopped inside a heartbeat's transaction, D would hold the row locked, and the
            # sweeper skips locked rows: then let it finish that transaction, and stop it again.
            if self.wait_until("the sweep of D's lease", swept, timeout=6, fail=False):
                break
            d.process.send_signal(signal.SIGCONT)
            time.sleep(0.2)
        else:
            raise SystemExit(f"job {job_id} was never swept while worker D was stopped")
        self.workers["C"].events(job_id, "lease expired")
        e = self.start("E", "--queue", "slow", "--concurrency", "1")
        self.wait_until("worker E's claim", lambda: self.job(job_id).attempts == 2)
        d.process.send_signal(signal.SIGCONT)
        say("SIGCONT worker D: its handler of attempt 1 finishes and reports done")
        d.wait_for(f"job {job_id} render_pdf attempt 1 finished but its lease was lost")
        d.events(job_id, "lease")
        note(f"Job {job_id}, read back after worker D's late done:")
        self.job_rows(["id", "kind", "attempts", "status", "locked_by"], [job_id])
        job = self.job(job_id)
        self.observed["worker D's late done (attempt 1) changed nothing"] = (
            job.attempts == 2 and self.who(job.locked_by) == "E"
        )
        self.wait_until(f"job {job_id}", lambda: self.settled(job_id))
        self.job_rows(["id", "kind", "attempts", "status", "locked_by"], [job_id])
        e.events(job_id, "done")
        return job_id

    def final(self) -> None:
        step("The jobs table at the end")
        rows = self.jobs()
        table(
            ["id", "kind", "queue", "status", "attempts", "locked_by", "last_error"],
            [
                [
                    job.id,
                    job.kind,
                    job.queue,
                    job.status,
                    f"{job.attempts}/{job.max_attempts}",
                    self.who(job.locked_by),
                    (job.last_error or "").split("\n", 1)[0][:52] or None,
                ]
                for job in rows
            ],
        )
        ids = [job.id for job in rows]
        if ids == list(range(1, len(ids) + 1)):
            note(f"Job ids 1-{len(ids)}, none skipped.")
        step("Invoices per order")
        table(
            ["order_id", "invoices", "total_cents"],
            self.rows(
                select(Invoice.order_id, func.count(), func.sum(Invoice.total_cents))
                .group_by(Invoice.order_id)
                .order_by(Invoice.order_id)
            ),
        )

    def rollback_half(self) -> None:
        step("Enqueue with your data, the other half: an order whose transaction rolls back")
        with Session(self.engine) as session, session.begin():
            session.add(Order(id=5, customer="erin", total_cents=700))
            drawn = jobs.enqueue(session, "send_receipt", {"order_id": 5}).id
            session.rollback()
        note("Orders with id 5:")
        order = self.rows(select(Order.id).where(Order.id == 5))
        table(["id"], order)
        note("Jobs for order 5:")
        orphans = self.rows(select(Job.id).where(Job.payload["order_id"].as_integer() == 5))
        table(["id"], orphans)
        self.observed["no order 5 and no job for it after the rollback"] = not order and not orphans
        note(f"Neither order 5 nor its job exists. The job had drawn id {drawn}, which a rollback")
        note(f"never gives back (sequences are not transactional): the next job gets {drawn + 1}.")

    def skip_locked(self) -> None:
        step("Claiming with SKIP LOCKED: every claim the workers logged")
        claims: dict[tuple[int, int], list[str]] = {}
        for worker in self.workers.values():
            for found in re.finditer(r"job (\d+) \w+ attempt (\d+) claimed", worker.log()):
                claims.setdefault((int(found[1]), int(found[2])), []).append(worker.name)
        table(
            ["worker", "claimed (job/attempt)"],
            [
                [name, " ".join(f"{j}/{n}" for (j, n), w in sorted(claims.items()) if name in w)]
                for name in self.workers
            ],
        )
        twice = sorted(key for key, names in claims.items() if len(names) > 1)
        self.observed["no attempt claimed by two workers"] = not twice
        note(f"{len(claims)} attempts claimed, {len(twice) or 'none'} of them by two workers.")

    def check(self, fan_out: list[int], beyond: list[int], stalled: int) -> None:
        """Fail the demo unless the database holds the lesson's outcomes."""
        got = {job.id: job for job in self.jobs()}

        def state(job_id: int) -> tuple[str, int]:
            return got[job_id].status, got[job_id].attempts

        invoices = dict(
            self.rows(select(Invoice.order_id, func.count()).group_by(Invoice.order_id))
        )
        final = {
            "jobs 1 and 2 done at attempt 1": [state(1), state(2)] == [("done", 1)] * 2,
            "job 3 (the invoice) done at attempt 2": state(3) == ("done", 2),
            "job 4 done at attempt 2 by worker B": state(4) == ("done", 2)
            and self.who(got[4].locked_by) == "B",
            "job 5 failed (dead letter) at 3/3": state(5) == ("failed", 3)
            and got[5].max_attempts == 3,
            "job 6 done": state(6) == ("done", 1),
            "the three consumers done": [state(i)[0] for i in fan_out] == ["done"] * 3,
            "import_feed failed at 3/3": state(beyond[1]) == ("failed", 3),
            "render_pdf done at attempt 1": state(beyond[0]) == ("done", 1),
            "the stalled worker's job done at attempt 2 by worker E": state(stalled) == ("done", 2)
            and self.who(got[stalled].locked_by) == "E",
            "one invoice for order 3 and one for order 4": invoices == {3: 1, 4: 1},
            "job ids contiguous": sorted(got) == list(range(1, len(got) + 1)),
        }
        step("Checked in the database")
        for what, ok in [*self.observed.items(), *final.items()]:
            note(f"{'ok  ' if ok else 'FAIL'}  {what}")
        failed = [what for what, ok in [*self.observed.items(), *final.items()] if not ok]
        if failed:
            raise SystemExit("demo check failed: " + "; ".join(failed))

    def stop_workers(self) -> None:
        for name in ("B", "C", "D", "E"):
            code = self.workers[name].stop(signal.SIGTERM)
            say(f"SIGTERM worker {name}: graceful exit {code}")

    def close(self) -> None:
        for worker in self.workers.values():
            if worker.process.poll() is None:
                worker.stop(signal.SIGKILL)
        self.engine.dispose()


CONSUMERS = ("send_receipt", "create_invoice", "sync_crm")


def serve_dashboard(url: str, port: int) -> None:
    """``sa-jobqueue dashboard --app demo_app:jobs`` on the demo's database, until Ctrl-C."""
    script = Path(sys.executable).with_name("sa-jobqueue")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "sa_jobqueue.cli"]
    server = subprocess.Popen(
        [*command, "dashboard", "--app", "demo_app:jobs", "--port", str(port), "--allow-actions"],
        cwd=HERE,
        env={**os.environ, "DATABASE_URL": url},
    )
    say(f"dashboard: http://127.0.0.1:{port}/ (Ctrl-C stops it and drops the demo database)")
    try:
        server.wait()
    except KeyboardInterrupt:
        server.send_signal(signal.SIGINT)
        server.wait(30)


def identifier(value: str) -> str:
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", value):
        raise argparse.ArgumentTypeError(f"not a plain database name: {value!r}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description="The lesson replayed with real workers.")
    parser.add_argument("--dashboard", action="store_true", help="Then serve the dashboard.")
    parser.add_argument("--port", type=int, default=8787, help="The dashboard's port.")
    parser.add_argument(
        "--database",
        default=DEMO_DATABASE,
        type=identifier,
        help=f"The database to (re)create and leave for inspection (default {DEMO_DATABASE}).",
    )
    args = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix=f"sa_jobqueue_demo_{uuid.uuid4().hex[:6]}_"))
    try:
        with database(None if args.dashboard else args.database) as (url, kept):
            demo = Demo(url, logs)
            try:
                demo.migrate()
                demo.seed()
                demo.leases()
                demo.exactly_once()
                demo.enqueue_with_data()
                fan_out = demo.fan_out()
                beyond = demo.beyond()
                stalled = demo.stalled_worker()
                demo.final()
                demo.skip_locked()
                demo.rollback_half()
                demo.check(fan_out, beyond, stalled)
                demo.stop_workers()
            finally:
                demo.close()
            if kept:
                hints(url)
            if args.dashboard:
                serve_dashboard(url, args.port)
    finally:
        for path in logs.iterdir():
            path.unlink()
        logs.rmdir()
    say("done")


if __name__ == "__main__":
    main()
