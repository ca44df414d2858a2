"""`Driver`: every operation the worker runtime runs on the database, and what each guarantees.

One stateless protocol (River's ``riverdriver``): each method runs on the caller's
connection, in the caller's transaction, and never commits; what a worker remembers
between rounds (the claim-ahead locks, the queue rotation) stays with the worker. A
database gets one implementation (`sa_jobqueue.driver.postgres`), chosen by its dialect
in `sa_jobqueue.driver.registry`, and passes the conformance suite (tests/driver/)
unchanged. What a database may lack is a capability attribute, asked by callers, never
an ``if dialect.name == ...`` in them. Names are noun-first (``job_claim``); the
operations are declared by family, one protocol each in `sa_jobqueue.driver.protocol`,
joined here. See docs/architecture.md.
"""

from __future__ import annotations

from typing import Protocol

from sa_jobqueue.driver.protocol.archive import ArchiveOps
from sa_jobqueue.driver.protocol.children import ChildOps
from sa_jobqueue.driver.protocol.compensation import CompensationOps
from sa_jobqueue.driver.protocol.control import ControlOps
from sa_jobqueue.driver.protocol.counters import CounterOps
from sa_jobqueue.driver.protocol.deadlines import DeadlineOps
from sa_jobqueue.driver.protocol.enqueue import EnqueueOps
from sa_jobqueue.driver.protocol.jobs import ClaimOps, CompletionOps, FailureOps, LeaseOps
from sa_jobqueue.driver.protocol.notifications import NotificationOps
from sa_jobqueue.driver.protocol.schedules import ScheduleOps
from sa_jobqueue.driver.protocol.steps import StepOps
from sa_jobqueue.driver.protocol.workflows import WorkflowOps

__all__ = ["Driver"]


class Driver(
    ChildOps,
    ClaimOps,
    CompensationOps,
    CompletionOps,
    ControlOps,
    CounterOps,
    DeadlineOps,
    EnqueueOps,
    FailureOps,
    LeaseOps,
    NotificationOps,
    ScheduleOps,
    StepOps,
    WorkflowOps,
    Protocol,
):
    """What the worker runtime needs from a database; every change after a claim is fenced.

    "Fenced" means the statement changes a job only while it is ``running`` the very
    attempt given (its ``attempts``) under `owner` (its ``locked_by``): a stale worker
    whose lease was lost and whose job was claimed again changes nothing, and learns it
    from the return value. Each method runs in the caller's transaction on `conn` and
    never commits; its changes become visible, and its notifications are sent, at the
    caller's COMMIT.

    Attributes:
        supports_listen_notify: wake-ups travel by LISTEN/NOTIFY (else workers poll).
        supports_skip_locked: claims skip rows other transactions lock, never wait.
        supports_returning: a change returns the rows it changed in the same statement.
        supports_partial_indexes: the claim's index covers pending rows only.
        supports_advisory_locks: `lock_try` and the limited kinds' locks are advisory
            locks (else table rows stand in for them).
        supports_asynchronous_commit: `commit_asynchronously` skips the WAL flush wait
            (else it does nothing).
        supports_writing_ctes: an ``UPDATE ... RETURNING`` may run inside ``WITH``, its
            rows read by the outer statement, and ids travel as one array parameter:
            an operator's repair (`ops.admin.cancel`, ``retry``, ``delete_finished``,
            `ops.workflows.after_retry`) is then one statement that also announces
            the jobs it ended (else it locks its rows, then changes them by id).
        supports_statement_timeout: a transaction can bound how long each of its
            statements runs (``statement_timeout``): the dashboard's pages do (else
            they run untimed).
        supports_row_estimates: the planner's row count of the jobs table can be read
            from the catalog (`statements.status_estimates`): a big table's finished
            statuses are then estimated, not counted (else every count is exact).
        supports_cascading_deletes: deleting a job deletes the rows that reference it
            ``ON DELETE CASCADE`` (its steps, signals, edges, history). SQLite does so
            only under ``PRAGMA foreign_keys = ON``, off by default: there a deleter
            (`jobs_prune`, `ops.admin.delete_finished`) deletes them first
            (`statements.cascades.delete_cascaded`), else a later job given a deleted
            job's id (SQLite reuses the largest) would inherit its recorded steps.
        supports_partitions: range partitions by ``finished_at`` (PostgreSQL's
            declarative ones, MariaDB's ``RANGE COLUMNS``): the archive (`ops.archive`)
            runs there, through `archive` (else ``archive_after`` is refused where it
            is given).
        supports_one_statement_steps: `step_record` is one statement, atomic on its own:
            a lease-mode step runs it on an autocommit connection, one round trip
            (else BEGIN, its statements, COMMIT).
        archive: the archive's operations on this database (`ArchiveOps`).
    """

    supports_listen_notify: bool
    supports_skip_locked: bool
    supports_returning: bool
    supports_partial_indexes: bool
    supports_advisory_locks: bool
    supports_asynchronous_commit: bool
    supports_writing_ctes: bool
    supports_statement_timeout: bool
    supports_row_estimates: bool
    supports_cascading_deletes: bool
    supports_partitions: bool
    supports_one_statement_steps: bool

    @property
    def archive(self) -> ArchiveOps:
        """The archive's operations on this database (`ArchiveOps`)."""
        ...
