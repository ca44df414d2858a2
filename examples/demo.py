"""`make demo`: the lesson end to end, with real `sa-jobqueue worker` processes.

Without DATABASE_URL it starts a throwaway PostgreSQL in a temporary directory
(and removes it afterwards); with DATABASE_URL it works in a scratch database on
that server and drops it afterwards. Then it:

1. migrates, and enqueues orders and their jobs in one transaction each (and
   shows that a rolled-back order leaves no job);
2. starts worker A on the ``slow`` queue and kills it with ``kill -9`` in the
   middle of a PDF job and an invoice transaction;
3. starts worker B on every queue: it processes the jobs, retries a flaky CRM
   sync with backoff, dead-letters a poison feed, and, once the dead worker's
   leases expire, recovers its two jobs (attempt 2);
4. stops worker B with SIGTERM and prints the jobs table and the invoices.

With ``--dashboard`` (``make demo-dashboard``) it then serves ``sa-jobqueue
dashboard`` on the demo's database (``--port``, default 8787) until Ctrl-C, and
drops the database afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from sqlalchemy import Engine, create_engine, func, select
from sqlalchemy.orm import Session

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sa_jobqueue import migration  # noqa: E402
from sa_jobqueue.testing import scratch_database, throwaway_postgres  # noqa: E402

from demo_app import Base, Invoice, Job, Order, jobs  # noqa: E402

STARTED = time.monotonic()


def say(message: str) -> None:
    print(f"[{time.monotonic() - STARTED:4.1f}s] {message}", flush=True)


@contextlib.contextmanager
def database() -> Iterator[str]:
    server = os.environ.get("DATABASE_URL")
    with contextlib.ExitStack() as stack:
        if server:
            say("using a scratch database on $DATABASE_URL's server")
        else:
            say("no DATABASE_URL: starting a throwaway PostgreSQL")
            server = stack.enter_context(throwaway_postgres())
        yield stack.enter_context(scratch_database(server, prefix="sa_jobqueue_demo"))


class Worker:
    """An ``sa-jobqueue worker demo_app:jobs`` process, logging to a file."""

    def __init__(self, name: str, url: str, logs: Path, *options: str) -> None:
        script = Path(sys.executable).with_name("sa-jobqueue")
        command = [str(script)] if script.exists() else [sys.executable, "-m", "sa_jobqueue.cli"]
        self.name = name
        self.log_path = logs / f"worker-{name}.log"
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [*command, "worker", "demo_app:jobs", "--poll-interval", "0.5", *options],
            cwd=HERE,  # the CLI imports demo_app from the current directory
            env={**os.environ, "DATABASE_URL": url},
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.wait_for(" started: ")
        say(f"worker {name} started (pid {self.process.pid}) {' '.join(options)}")

    def wait_for(self, text: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log_path.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"worker {self.name} failed:\n{self.log_path.read_text()}")
            time.sleep(0.05)

    def stop(self, sig: signal.Signals) -> int:
        self.process.send_signal(sig)
        code = self.process.wait(30)
        self._log.close()
        return code


def statuses(engine: Engine) -> dict[str, int]:
    with Session(engine) as s:
        rows = s.execute(select(Job.status, func.count()).group_by(Job.status))
        return {status: n for status, n in rows}


def wait_until(what: str, check: Callable[[], bool], timeout: float = 40) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def enqueue_orders(engine: Engine) -> None:
    orders = [(1, "alice", 1200), (2, "bob", 4500), (3, "carol", 9900), (4, "dave", 2500)]
    for order_id, customer, total in orders:
        with Session(engine) as session, session.begin():  # the order and its jobs, atomically
            session.add(Order(id=order_id, customer=customer, total_cents=total))
            jobs.enqueue(
                session,
                "send_receipt",
                {"order_id": order_id},
                idempotency_key=f"order:{order_id}:receipt",
            )
            stall = order_id == 3  # the demo's crash happens in this invoice's transaction
            jobs.enqueue(
                session,
                "create_invoice",
                {"order_id": order_id, "stall": stall},
                queue="slow" if stall else None,
            )
    say("orders 1-4 committed, each with its send_receipt and create_invoice jobs")
    with Session(engine) as session, session.begin():
        jobs.enqueue(session, "send_receipt", {"order_id": 4}, idempotency_key="order:4:receipt")
    say("send_receipt for order 4 enqueued again with its idempotency key: still one job")
    with Session(engine) as session, session.begin():
        session.add(Order(id=5, customer="erin", total_cents=700))
        jobs.enqueue(session, "send_receipt", {"order_id": 5})
        session.rollback()
    say("order 5 rolled back: its job never existed")
    with Session(engine) as session, session.begin():
        jobs.enqueue(session, "render_pdf", {"order_id": 2, "stall": True})
        jobs.enqueue(session, "sync_crm", {"order_id": 1})
        jobs.enqueue(session, "import_feed", {"url": "ftp://legacy/feed.xml"})
    say("enqueued: render_pdf (slow), sync_crm (flaky), import_feed (poison)")


def print_tables(engine: Engine) -> None:
    with Session(engine) as s:
        print("\nFinal jobs table:")
        header = f"{'id':>3}  {'kind':<15}{'queue':<9}{'status':<9}{'attempts':>8}  last_error"
        print(header)
        print("-" * len(header))
        for job in s.scalars(select(Job).order_by(Job.id)):
            error = (job.last_error or "").split("\n", 1)[0][:48]
            print(
                f"{job.id:>3}  {job.kind:<15}{job.queue:<9}{job.status:<9}"
                f"{job.attempts:>4}/{job.max_attempts:<3}  {error}"
            )
        print("\nInvoices per order:")
        rows = s.execute(
            select(Invoice.order_id, func.count(), func.sum(Invoice.total_cents))
            .group_by(Invoice.order_id)
            .order_by(Invoice.order_id)
        )
        for order_id, n, total in rows:
            print(f"  order {order_id}: {n} invoice(s), {total} cents")


def check(engine: Engine) -> None:
    with Session(engine) as s:
        invoices = dict(
            s.execute(select(Invoice.order_id, func.count()).group_by(Invoice.order_id)).all()
        )
        by_kind = {(j.kind, j.payload.get("order_id")): j for j in s.scalars(select(Job))}
        job_count = s.scalar(select(func.count()).select_from(Job))
    problems = []
    if invoices != {1: 1, 2: 1, 3: 1, 4: 1}:
        problems.append(f"expected one invoice per order, got {invoices}")
    if job_count != 11:
        problems.append(f"expected 11 jobs, got {job_count}")
    pdf, invoice3 = by_kind[("render_pdf", 2)], by_kind[("create_invoice", 3)]
    if (pdf.status, pdf.attempts, invoice3.status, invoice3.attempts) != ("done", 2, "done", 2):
        problems.append("the killed worker's jobs were not recovered on attempt 2")
    flaky, poison = by_kind[("sync_crm", 1)], by_kind[("import_feed", None)]
    if (flaky.status, flaky.attempts, poison.status, poison.attempts) != ("done", 3, "failed", 3):
        problems.append("flaky job not done, or poison job not dead-lettered")
    if problems:
        raise SystemExit("demo check failed: " + "; ".join(problems))
    say("checked: one invoice per order, the crash recovered, retries and dead letter as expected")


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


def main() -> None:
    parser = argparse.ArgumentParser(description="The lesson end to end with real workers.")
    parser.add_argument("--dashboard", action="store_true", help="Then serve the dashboard.")
    parser.add_argument("--port", type=int, default=8787, help="The dashboard's port.")
    args = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="sa_jobqueue_demo_"))
    try:
        with database() as url:
            migration.upgrade(url)
            engine = create_engine(url)
            Base.metadata.create_all(engine, tables=[Order.__table__, Invoice.__table__])
            say("migrated: jobs table (shipped Alembic revision), orders, invoices")
            enqueue_orders(engine)

            a = Worker("A", url, logs, "--queue", "slow", "--concurrency", "2")
            wait_until("worker A's claims", lambda: statuses(engine).get("running") == 2)
            say("worker A claimed render_pdf and the invoice of order 3 (3 s leases)")
            time.sleep(0.5)
            code = a.stop(signal.SIGKILL)
            say(f"kill -9 worker A (exit {code}) in the middle of both jobs")

            b = Worker("B", url, logs, "--concurrency", "4", "--sweep-interval", "1")
            wait_until("every job to settle", lambda: set(statuses(engine)) <= {"done", "failed"})
            say(f"all jobs settled: {statuses(engine)}")
            code = b.stop(signal.SIGTERM)
            say(f"SIGTERM worker B: graceful exit {code}")

            print("\nWorker B's log (job events):")
            for line in (logs / "worker-B.log").read_text().splitlines():
                if (" job " in line or "lease" in line) and "attempt 1 claimed" not in line:
                    print("  " + line.split(": ", 1)[-1])
            print_tables(engine)
            check(engine)
            engine.dispose()
            if args.dashboard:
                serve_dashboard(url, args.port)
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    say("done")


if __name__ == "__main__":
    main()
