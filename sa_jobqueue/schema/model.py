"""`JobMixin`: the jobs table's columns, constraints and indexes, mixed into the app's model."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Identity,
    Index,
    Integer,
    SmallInteger,
    Table,
    Text,
    UniqueConstraint,
    event,
    text,
)
from sqlalchemy.orm import Mapped, Mapper, declared_attr, mapped_column
from sqlalchemy.sql import FromClause

from sa_jobqueue.schema import ddl
from sa_jobqueue.schema.active_keys import not_mysql
from sa_jobqueue.schema.archive import archive_table_for
from sa_jobqueue.schema.counters import add_counters
from sa_jobqueue.schema.dependencies import dependencies_table
from sa_jobqueue.schema.naming import check_table_name
from sa_jobqueue.schema.registry_tables import errors_table_for, workers_table_for
from sa_jobqueue.schema.starts import starts_table
from sa_jobqueue.schema.state_tables import add_state_tables, turns_table_for, weights_table_for
from sa_jobqueue.schema.status_indexes import PENDING, RUNNING
from sa_jobqueue.schema.steps import signals_table, steps_table
from sa_jobqueue.schema.types import Id, Json, Key, Timestamp, utc_now

__all__ = [
    "ACTIVE",
    "AFTER_FAILURE",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_QUEUE",
    "FINISHED",
    "FIRST_STATUSES",
    "UNFINISHED",
    "JobMixin",
    "JobT",
    "Status",
]

DEFAULT_QUEUE = "default"
DEFAULT_MAX_ATTEMPTS = 20
#: The values of ``after_failure``: what a waiting job does when an upstream job fails.
AFTER_FAILURE = ("cancel", "run")


class Status(str, enum.Enum):
    """A job's status. A `str` enum, so drivers write its value and not its name."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    #: Waits for other jobs (``after=``); not claimable until they end (docs/workflows.md).
    WAITING = "waiting"

    def __str__(self) -> str:
        return self.value


FINISHED = (Status.DONE, Status.FAILED, Status.CANCELLED)
#: The statuses before workflows (revision ``sajq_0005`` adds ``waiting``).
FIRST_STATUSES = (Status.PENDING, Status.RUNNING, *FINISHED)
ACTIVE = (Status.PENDING, Status.RUNNING)
#: Not finished: what a waiting job's upstream may still be, and what retention keeps.
UNFINISHED = (Status.PENDING, Status.RUNNING, Status.WAITING)

_PayloadType = Json


def since(revision: str) -> dict[str, str]:
    """``info`` for a column added by `revision` after the table's first revision.

    The first revision (``sajq_0001``) creates only the columns without it, and
    each later revision adds its own, so an old revision's schema never changes.
    """
    return {REVISION_INFO: revision}


#: The ``Column.info`` key naming the revision that added a column (or an index).
REVISION_INFO = "sa_jobqueue_revision"

#: The predicates of the debounce, throttle and keyed partial indexes (sajq_0006).
DEBOUNCE_WHERE = "status = 'pending' AND debounce_key IS NOT NULL"
THROTTLE_WHERE = "throttle_key IS NOT NULL"
KEYED_WHERE = "status = 'pending' AND concurrency_key IS NOT NULL"


def _sql_list(values: tuple[Status, ...]) -> str:
    return ", ".join(f"'{v.value}'" for v in values)


class JobMixin:
    """Columns, constraints and indexes of a jobs table; the application names the table.

    Example:
        >>> from sqlalchemy.orm import DeclarativeBase
        >>> class Base(DeclarativeBase): ...
        >>> class Job(JobMixin, Base):
        ...     __tablename__ = "jobs"

    Every constraint and index is named after the table (``ck_jobs_status``,
    ``ix_jobs_pending``...), so several job tables can share one ``MetaData``.
    Defaults exist both in Python (set at flush) and on the server (for raw SQL
    inserts), and ``eager_defaults`` reads the server-made ones back on flush, so
    ``session.add(Job(kind=..., payload=...))`` yields a fully populated row.
    Timestamps come from the database clock.

    ``Base.metadata.create_all(engine)`` makes the same table as ``sa-jobqueue
    migrate``: on PostgreSQL the table's ``after_create`` also applies the
    autovacuum settings and creates the notify trigger (`sa_jobqueue.schema.ddl`), and
    ``drop_all`` removes the trigger function.
    """

    if TYPE_CHECKING:
        # The same declarations as SQLAlchemy's DeclarativeBase, so the two agree.
        __tablename__: Any
        __table__: ClassVar[FromClause]

    id: Mapped[int] = mapped_column(Id, Identity(), primary_key=True)
    queue: Mapped[str] = mapped_column(
        Key, default=DEFAULT_QUEUE, server_default=DEFAULT_QUEUE, nullable=False
    )
    kind: Mapped[str] = mapped_column(Key, nullable=False)
    payload: Mapped[Any] = mapped_column(
        _PayloadType, default=dict, server_default=text("'{}'"), nullable=False
    )
    status: Mapped[str] = mapped_column(
        Key, default=Status.PENDING.value, server_default=Status.PENDING.value, nullable=False
    )
    priority: Mapped[int] = mapped_column(
        SmallInteger, default=0, server_default=text("0"), nullable=False
    )
    attempts: Mapped[int] = mapped_column(
        Integer, default=0, server_default=text("0"), nullable=False
    )
    max_attempts: Mapped[int] = mapped_column(
        Integer,
        default=DEFAULT_MAX_ATTEMPTS,
        server_default=text(str(DEFAULT_MAX_ATTEMPTS)),
        nullable=False,
    )
    run_at: Mapped[datetime] = mapped_column(Timestamp(), server_default=utc_now(), nullable=False)
    locked_until: Mapped[datetime | None] = mapped_column(Timestamp())
    locked_by: Mapped[str | None] = mapped_column(Key)
    idempotency_key: Mapped[str | None] = mapped_column(Key)
    #: Deduplicates while a job is pending or running (see `JobQueue.enqueue`).
    unique_key: Mapped[str | None] = mapped_column(Key)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(
        Timestamp(), server_default=utc_now(), nullable=False
    )
    updated_at: Mapped[datetime] = mapped_column(
        Timestamp(), server_default=utc_now(), nullable=False
    )
    finished_at: Mapped[datetime | None] = mapped_column(Timestamp())
    # Added by revision sajq_0003, so last (the migrated table's column order).
    #: Serialises jobs of a kind with ``max_running_per_key`` (docs/flow-control.md).
    concurrency_key: Mapped[str | None] = mapped_column(Key)
    # Added by revision sajq_0004 (`since` tells create_jobs_table to leave them to it).
    result: Mapped[Any] = mapped_column(_PayloadType, nullable=True, info=since("sajq_0004"))
    trace_context: Mapped[Any] = mapped_column(_PayloadType, nullable=True, info=since("sajq_0004"))
    # Added by revision sajq_0005 (workflows, docs/workflows.md).
    #: How many of the jobs it waits for have not ended; NULL for a job without ``after=``.
    waiting_for: Mapped[int | None] = mapped_column(Integer, info=since("sajq_0005"))
    #: ``'cancel'`` or ``'run'``: what it does when a job it waits for fails (NULL: no wait).
    after_failure: Mapped[str | None] = mapped_column(Text, info=since("sajq_0005"))
    #: True once some job waits for it: its fenced end then releases them.
    has_dependents: Mapped[bool | None] = mapped_column(Boolean, info=since("sajq_0005"))
    # Added by revision sajq_0006 (docs/flow-control.md, debounce and throttle).
    #: Enqueues with ``debounce=(key, window)`` collapse into the pending job holding it.
    debounce_key: Mapped[str | None] = mapped_column(Key, info=since("sajq_0006"))
    #: Enqueues with ``throttle=(key, window)``: at most one job per key per window.
    throttle_key: Mapped[str | None] = mapped_column(Key, info=since("sajq_0006"))
    # Added by revision sajq_0007 (durable steps, docs/durable.md).
    #: The last ``ctx.progress(value)`` of its handler: a number 0-1 or a small object.
    progress: Mapped[Any] = mapped_column(_PayloadType, nullable=True, info=since("sajq_0007"))
    #: True once it recorded a step (or a sleep, or a wait): its next attempt reads them.
    has_steps: Mapped[bool | None] = mapped_column(Boolean, info=since("sajq_0007"))

    __mapper_args__: ClassVar[dict[str, Any]] = {"eager_defaults": True}

    @declared_attr.directive
    def __table_args__(cls) -> tuple[Any, ...]:
        return table_args(cls.__tablename__)

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} id={self.id} kind={self.kind!r} queue={self.queue!r} "
            f"status={self.status!r} attempts={self.attempts}/{self.max_attempts}>"
        )


@event.listens_for(JobMixin, "instrument_class", propagate=True)
def _add_state_tables(mapper: Mapper[Any], cls: type[Any]) -> None:
    # The paused-queues and schedules tables join the model's MetaData, so
    # create_all makes them with the jobs table (sa_jobqueue.schema.state_tables).
    table = mapper.local_table
    if isinstance(table, Table):
        add_state_tables(table)
        starts_table(table.metadata, table.name)  # the rate limits' starts log
        dependencies_table(table.metadata, table.name)  # workflows' edges
        weights_table_for(table)  # the fair kinds' weights and turns (sajq_0006)
        turns_table_for(table)
        steps_table(table.metadata, table.name)  # durable steps and signals (sajq_0007)
        signals_table(table.metadata, table.name)
        workers_table_for(table)  # the worker registry and attempt history (sajq_0008)
        errors_table_for(table)
        archive_table_for(table)  # finished jobs, partitioned by finished time (sajq_0011)
        add_counters(table)  # the counters of ended jobs (sajq_0012)


def table_args(table: str, *, statuses: tuple[Status, ...] = tuple(Status)) -> tuple[Any, ...]:
    """The constraints and indexes of a jobs table named `table`.

    Shared by `JobMixin` and the migration helpers, so the migrated schema and the
    model are built from one definition. `statuses` are those the status CHECK
    accepts: the first revision's table accepts those before ``waiting``, which
    revision ``sajq_0005`` adds.
    """
    check_table_name(table)
    return (
        CheckConstraint(f"status IN ({_sql_list(statuses)})", name=f"ck_{table}_status"),
        CheckConstraint("attempts >= 0", name=f"ck_{table}_attempts"),
        CheckConstraint("max_attempts >= 1", name=f"ck_{table}_max_attempts"),
        UniqueConstraint("idempotency_key", name=f"uq_{table}_idempotency_key"),
        # Claim order; only claimable rows are in it, so done rows never slow a claim.
        # MySQL has no partial index: status is in its key there (schema.status_indexes).
        not_mysql(
            Index(
                PENDING.name(table),
                *PENDING.columns,
                postgresql_where=text("status = 'pending'"),
                sqlite_where=text("status = 'pending'"),
            )
        ),
        # The sweeper's path to expired leases, and every count of running jobs'.
        # MySQL: status in its key instead (schema.status_indexes), as for the claim's.
        not_mysql(
            Index(
                RUNNING.name(table),
                *RUNNING.columns,
                postgresql_where=text("status = 'running'"),
                sqlite_where=text("status = 'running'"),
            )
        ),
        # One active (pending or running) job per unique_key; finished ones free it.
        # MySQL has no partial index: a generated column's instead (schema.active_keys).
        not_mysql(
            Index(
                f"uq_{table}_unique_key",
                "unique_key",
                unique=True,
                postgresql_where=text(f"status IN ({_sql_list(ACTIVE)})"),
                sqlite_where=text(f"status IN ({_sql_list(ACTIVE)})"),
            )
        ),
        # Added by sajq_0006: one pending job per debounce key (the upsert's arbiter).
        not_mysql(
            Index(
                f"uq_{table}_debounce_key",
                "debounce_key",
                unique=True,
                postgresql_where=text(DEBOUNCE_WHERE),
                sqlite_where=text(DEBOUNCE_WHERE),
                info=since("sajq_0006"),
            )
        ),
        # Added by sajq_0006: a throttle key's latest job, by run_at.
        Index(
            f"ix_{table}_throttle_key",
            "throttle_key",
            "run_at",
            postgresql_where=text(THROTTLE_WHERE),
            sqlite_where=text(THROTTLE_WHERE),
            info=since("sajq_0006"),
        ),
        # Added by sajq_0006: fair claims walk the keys of a kind's pending jobs here
        # (one probe per key) and read each key's first due jobs in claim order.
        Index(
            f"ix_{table}_keyed",
            "queue",
            "kind",
            "concurrency_key",
            "priority",
            "run_at",
            "id",
            postgresql_where=text(KEYED_WHERE),
            sqlite_where=text(KEYED_WHERE),
            info=since("sajq_0006"),
        ),
        # Retention: prune finished rows by age without scanning live ones.
        Index(
            f"ix_{table}_finished",
            "finished_at",
            postgresql_where=text(f"status IN ({_sql_list(FINISHED)})"),
            sqlite_where=text(f"status IN ({_sql_list(FINISHED)})"),
        ),
    )


JobT = TypeVar("JobT", bound=JobMixin)


@event.listens_for(JobMixin, "after_mapper_constructed", propagate=True)
def _attach_ddl(mapper: Mapper[Any], cls: type[Any]) -> None:
    # Every mapped JobMixin table gets the trigger and settings at create_all.
    table = mapper.local_table
    if isinstance(table, Table):
        ddl.attach_to(table)
