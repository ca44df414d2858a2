"""The durable-step tables beside a jobs table: recorded steps and signals (sajq_0007).

``sa_jobqueue_steps_<table>`` holds one row per step a job recorded (``ctx.step``, and the
sleeps and signal waits, which are steps of their own kinds); ``sa_jobqueue_signal_<table>``
one row per signal sent to a job (``jobs.signal``). Both cascade from the job, so retention
(or any delete) removes them with it. `JobMixin` declares them in the model's `MetaData`, so
``create_all`` makes them as the migration does. See docs/durable.md.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
)
from sqlalchemy.dialects.postgresql import JSONB

from sa_jobqueue.schema.naming import signals_table_name, steps_table_name
from sa_jobqueue.schema.types import Id, Key, Timestamp, utc_now

__all__ = ["STEP_KINDS", "signals_table", "steps_table"]

#: What a step row records: a step's result, a sleep, a signal wait still open
#: (``wait``: the job is parked for it), a signal received, a wait that timed out, a
#: failed try of a step with `Step` options (named ``<step>#<attempt>.<try>``), a
#: ``ctx.patched`` marker's answer (``patch``: ``true`` or ``false``), a ``ctx.spawn``'s
#: child (``spawn``: its id), a ``ctx.wait_for_job`` whose job ended (``child``: its
#: status, result and error; while it waits, a ``wait`` named ``job:<id>``); and
#: compensation (`sa_jobqueue.core.compensation`): a `Step`'s ``compensate`` import path
#: (``compensate``, named ``<step>#compensate``), a compensation that returned
#: (``compensated``, ``<step>#compensated``), the job's compensation state
#: (named ``#compensation``: ``compensating`` while owed, then ``compensation``,
#: its result saying finished or failed).
STEP_KINDS = (
    "step",
    "sleep",
    "wait",
    "signal",
    "timeout",
    "try",
    "patch",
    "spawn",
    "child",
    "compensate",
    "compensated",
    "compensating",
    "compensation",
)

_json = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")


def _existing(metadata: MetaData, name: str) -> Table | None:
    return metadata.tables.get(f"{metadata.schema}.{name}" if metadata.schema else name)


def _target(metadata: MetaData, table: str) -> str:
    return f"{metadata.schema}.{table}.id" if metadata.schema else f"{table}.id"


def steps_table(metadata: MetaData, table: str) -> Table:
    """The recorded steps of the jobs table `table`, declared in `metadata` (once)."""
    name = steps_table_name(table)
    existing = _existing(metadata, name)
    if existing is not None:
        return existing
    return Table(
        name,
        metadata,
        Column("job_id", BigInteger, nullable=False),
        Column("name", Key, nullable=False),
        # One of STEP_KINDS (no CHECK: a later kind must not need a table rewrite).
        Column("kind", Key, nullable=False),
        # A step's return value; a received signal's payload; NULL for the rest.
        Column("result", _json),
        # The attempt that recorded it (fenced: the attempt holding the lease then).
        Column("attempt", Integer, nullable=False),
        Column("recorded_at", Timestamp(), server_default=utc_now(), nullable=False),
        # A sleep's end; an open wait's timeout (NULL: it waits without one).
        Column("until", Timestamp()),
        # (job_id, name): a name is recorded once per job; the preload reads by job.
        PrimaryKeyConstraint("job_id", "name", name=f"pk_{table}_steps"),
        ForeignKeyConstraint(
            ["job_id"], [_target(metadata, table)], name=f"fk_{table}_steps", ondelete="CASCADE"
        ),
    )


def signals_table(metadata: MetaData, table: str) -> Table:
    """The signals sent to jobs of the jobs table `table`, declared in `metadata` (once)."""
    name = signals_table_name(table)
    existing = _existing(metadata, name)
    if existing is not None:
        return existing
    return Table(
        name,
        metadata,
        Column("id", Id, Identity(), nullable=False),
        Column("job_id", BigInteger, nullable=False),
        Column("name", Key, nullable=False),
        Column("payload", _json),
        Column("sent_at", Timestamp(), server_default=utc_now(), nullable=False),
        # Set when a wait took it (``ctx.wait_for_signal``); kept, as history.
        Column("consumed_at", Timestamp()),
        PrimaryKeyConstraint("id", name=f"pk_{table}_signals"),
        ForeignKeyConstraint(
            ["job_id"], [_target(metadata, table)], name=f"fk_{table}_signals", ondelete="CASCADE"
        ),
        # A wait's path: the oldest signal of that name not yet taken.
        Index(f"ix_{table}_signals_job", "job_id", "name", "id"),
    )
