"""The application the chaos run's `sa-jobqueue worker` processes import.

``sa-jobqueue worker tests.support.chaos_app:jobs --queue chaos ...`` (run from the
repository root). Every handler leaves a trail in ``chaos_effects`` that the
oracle in ``bench/scenarios/chaos.py`` reads back with SQL:

* ``start``: written (autocommit, on the app's own connection) as an attempt begins;
* ``fail``: the attempt is about to fail on purpose;
* ``ok``: the side effect. Lease kinds write it on the app's connection once the
  work is done (so a run that is interrupted after it shows up as a duplicate);
  transactional kinds write it through ``ctx.session``, in the transaction that
  also carries the job's ``done`` mark (so exactly one must exist).

Kinds: ``lease_ok``/``tx_ok`` succeed; ``lease_flaky``/``tx_flaky`` fail their
first ``payload["fail"]`` attempts on purpose, then succeed; ``lease_poison``/
``tx_poison`` always fail and must end ``failed``; ``probe`` (queue ``probe``)
does nothing and measures wake-up latency. Handlers sleep ``payload["ms"]``.
``lease_held`` (queue ``held``) is a lease kind that does not sleep: the workers of
that queue run hundreds of them, so they claim jobs ahead of their one slot, and the
chaos driver stops them with SIGSTOP while they hold those (``began``, the wall-clock
time the handler's first line ran, lets the oracle tell when each attempt started).
"""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Engine,
    Integer,
    MetaData,
    Table,
    Text,
    create_engine,
    func,
    insert,
    select,
    text,
)

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.retry import Backoff
from tests.support.models import Job

#: Seconds a claim lasts without a heartbeat: short, so a killed worker's jobs
#: come back quickly.
LEASE = float(os.environ.get("CHAOS_LEASE", "4"))
HELD_KIND = "lease_held"
OK_KINDS = ("lease_ok", "tx_ok", HELD_KIND)
FLAKY_KINDS = ("lease_flaky", "tx_flaky")
POISON_KINDS = ("lease_poison", "tx_poison")
LEASE_KINDS = ("lease_ok", "lease_flaky", "lease_poison", HELD_KIND)
TX_KINDS = ("tx_ok", "tx_flaky", "tx_poison")
KINDS = OK_KINDS + FLAKY_KINDS + POISON_KINDS
POISON_MAX_ATTEMPTS = 3
MAX_ATTEMPTS = 12

metadata = MetaData()

effects = Table(
    "chaos_effects",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("job_id", BigInteger, nullable=False, index=True),
    Column("attempt", Integer, nullable=False),
    Column("kind", Text, nullable=False),
    Column("worker", Text, nullable=False),
    Column("phase", Text, nullable=False),  # start | fail | ok
    Column("began", DateTime(timezone=True)),  # start: when the handler's first line ran
    Column("at", DateTime(timezone=True), server_default=text("clock_timestamp()")),
)

#: Every change of a job row, recorded by a trigger (see `install`): the claim
#: history the oracle checks fencing against.
TRANSITIONS_DDL = """
CREATE TABLE IF NOT EXISTS chaos_transitions (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    old_status text, new_status text,
    old_attempts int, new_attempts int,
    old_locked_by text, new_locked_by text,
    last_error text,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS chaos_transitions_job ON chaos_transitions (job_id, id);
CREATE OR REPLACE FUNCTION chaos_log_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IS DISTINCT FROM OLD.status OR NEW.attempts IS DISTINCT FROM OLD.attempts THEN
        INSERT INTO chaos_transitions (job_id, old_status, new_status, old_attempts,
            new_attempts, old_locked_by, new_locked_by, last_error)
        VALUES (NEW.id, OLD.status, NEW.status, OLD.attempts, NEW.attempts,
            OLD.locked_by, NEW.locked_by, left(NEW.last_error, 200));
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS chaos_log_transition ON jobs;
CREATE TRIGGER chaos_log_transition AFTER UPDATE ON jobs
    FOR EACH ROW EXECUTE FUNCTION chaos_log_transition();
"""


def install(engine: Engine) -> None:
    """Create the effects and transitions tables and the transition trigger."""
    metadata.create_all(engine)
    with engine.begin() as connection:
        connection.exec_driver_sql(TRANSITIONS_DDL)


jobs: JobQueue[Job] = JobQueue(Job)
_backoff = Backoff(base=0.2, factor=2.0, cap=2.0, jitter=0.1)
_engine: Engine | None = None
_engine_lock = threading.Lock()


def app_engine() -> Engine:
    """The app's own engine (effects), separate from the worker's; made on first use."""
    global _engine
    with _engine_lock:
        if _engine is None:
            url = os.environ["CHAOS_DATABASE_URL"]
            _engine = create_engine(
                url, pool_size=4, max_overflow=4, pool_pre_ping=True, pool_timeout=10
            )
        return _engine


def _mark(ctx: JobContext, phase: str, began: datetime | None = None) -> None:
    with app_engine().begin() as connection:
        connection.execute(
            insert(effects).values(
                job_id=ctx.id,
                attempt=ctx.attempt,
                kind=ctx.kind,
                worker=ctx.worker_id,
                phase=phase,
                began=began,
            )
        )


def _work(ctx: JobContext, began: datetime) -> None:
    _mark(ctx, "start", began)
    time.sleep(int(ctx.payload.get("ms", 100)) / 1000)
    if ctx.kind in POISON_KINDS or ctx.attempt <= int(ctx.payload.get("fail", 0)):
        _mark(ctx, "fail")
        raise RuntimeError(f"{ctx.kind} fails attempt {ctx.attempt} on purpose")


def lease_handler(ctx: JobContext) -> None:
    """At-least-once: the effect is written after the work, outside any queue transaction."""
    began = datetime.now(UTC)
    _work(ctx, began)
    _mark(ctx, "ok")


def tx_handler(ctx: JobContext) -> None:
    """Exactly-once: the effect commits with the ``done`` mark, or not at all."""
    began = datetime.now(UTC)
    # Read first, as a handler loading its inputs would: its transaction is then
    # open (and can be cut by the chaos driver) while the work runs.
    ctx.session.execute(
        select(func.count()).where(effects.c.job_id == ctx.id, effects.c.phase == "ok")
    )
    _work(ctx, began)
    ctx.session.execute(
        insert(effects).values(
            job_id=ctx.id, attempt=ctx.attempt, kind=ctx.kind, worker=ctx.worker_id, phase="ok"
        )
    )


def probe(ctx: JobContext) -> None:
    """Nothing: its claim time is the measurement."""


for _kind in KINDS:
    jobs.task(
        _kind,
        queue="held" if _kind == HELD_KIND else "chaos",
        lease=LEASE,
        transactional=_kind in TX_KINDS,
        max_attempts=POISON_MAX_ATTEMPTS if _kind in POISON_KINDS else MAX_ATTEMPTS,
        backoff=_backoff,
    )(tx_handler if _kind in TX_KINDS else lease_handler)
jobs.task("probe", queue="probe", lease=LEASE, max_attempts=MAX_ATTEMPTS)(probe)


def expected_status(kind: str) -> str:
    """How a job of `kind` must end."""
    return "failed" if kind in POISON_KINDS else "done"


def payload_for(kind: str, ms: int, fail: int = 0) -> dict[str, Any]:
    """The payload a chaos job of `kind` carries."""
    return {"ms": ms, "fail": fail if kind in FLAKY_KINDS else 0}
