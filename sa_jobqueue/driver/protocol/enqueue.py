"""`EnqueueOps`: the driver's operations for enqueue: one, many, keyed, edges, batches.

Unlike the worker's operations, these run in the caller's ORM `Session` (its connection,
its transaction): an enqueue returns mapped jobs, loaded or attached as if loaded, and
the session's pending objects are flushed first, as before any ORM statement. None of
them commits. See sa_jobqueue/driver/base.py and docs/enqueue.md#what-enqueue-does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from sqlalchemy.orm import Session

from sa_jobqueue.schema.model import JobMixin

__all__ = ["DebouncedJob", "EnqueueOps", "InsertShape", "JobsInsert", "NewJob"]


class NewJob(Protocol):
    """A validated job to insert (`sa_jobqueue.enqueue.prepare.JobSpec` is one)."""

    @property
    def kind(self) -> str: ...  # noqa: D102
    @property
    def queue(self) -> str: ...  # noqa: D102
    @property
    def payload(self) -> str: ...  # noqa: D102 - JSON text
    @property
    def priority(self) -> int: ...  # noqa: D102
    @property
    def max_attempts(self) -> int: ...  # noqa: D102
    @property
    def run_at(self) -> datetime | None: ...  # noqa: D102
    @property
    def delay(self) -> float: ...  # noqa: D102 - seconds after now, when no run_at
    @property
    def idempotency_key(self) -> str | None: ...  # noqa: D102
    @property
    def unique_key(self) -> str | None: ...  # noqa: D102
    @property
    def concurrency_key(self) -> str | None: ...  # noqa: D102
    @property
    def columns(self) -> tuple[tuple[str, Any], ...]: ...  # noqa: D102 - own columns, by name
    @property
    def after(self) -> tuple[int, ...]: ...  # noqa: D102
    @property
    def after_failure(self) -> str: ...  # noqa: D102
    @property
    def status(self) -> str: ...  # noqa: D102 - with `JobsInsert.workflow` only
    @property
    def waiting_for(self) -> int | None: ...  # noqa: D102
    @property
    def has_dependents(self) -> bool | None: ...  # noqa: D102
    @property
    def last_error(self) -> str | None: ...  # noqa: D102


class InsertShape(NamedTuple):
    """Which columns an INSERT sets beyond a job's own fields, and which it returns.

    A caller makes one per shape and keeps it: the driver builds one statement per
    shape it is given, and looks it up at each insert (a tuple: hashed in C, where a
    frozen dataclass hashes in Python). ``timing`` and ``keys`` matter to
    `EnqueueOps.job_insert` only, and decide what it sends of the job: its ``run_at``
    (``"at"``) or its delay (``"after"``), and the keys named (a key the job sets and
    the shape does not name is not inserted).

    Attributes:
        timing: ``"now"`` (due now), ``"at"`` (its ``run_at``) or ``"after"`` (its delay).
        keys: which of ``idempotency_key``, ``unique_key``, ``concurrency_key`` it sets.
        extra: the application's own columns it sets, and ``trace_context`` when traced.
        returning: the columns returned, in order (JSON columns decoded).
    """

    timing: str = "now"
    keys: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    returning: tuple[str, ...] = ("id",)


@dataclass(frozen=True)
class JobsInsert:
    """A batch to insert as one statement.

    Attributes:
        jobs: the jobs, in insertion order.
        columns: the application's own columns some job sets, one value per job
            (None where a job leaves it; JSON text for a JSON column), by name.
        workflow: the jobs' workflow columns (``status``, ``waiting_for``...) are set too.
        trace_context: the W3C context every new row gets, if any.
    """

    jobs: Sequence[NewJob]
    columns: Mapping[str, Sequence[Any]]
    workflow: bool = False
    trace_context: Mapping[str, str] | None = None


@dataclass(frozen=True)
class DebouncedJob:
    """A debounced enqueue: `job` folds into the pending job of `key`, due `window` later."""

    job: NewJob
    key: str
    window: float
    trace_context: Mapping[str, str] | None = None


class EnqueueOps(Protocol):
    """The driver's operations of this family; each says the guarantee it keeps.

    What every insert shares: a taken idempotency key, or a unique key an active
    (``pending`` or ``running``) job holds, inserts nothing and never raises, so the
    caller's transaction stays usable; the caller then reads the job holding it
    (`jobs_by_keys`). Times come from the database clock.
    """

    def job_insert(
        self,
        session: Session,
        job: NewJob,
        shape: InsertShape,
        trace_context: Mapping[str, str] | None = None,
    ) -> Sequence[Any] | None:
        """Insert `job` in one round trip; its row of ``shape.returning``, or None: a key was taken.

        ``run_at``, the timestamps and ``id`` are the database's; columns not set
        take their defaults.
        """
        ...

    def jobs_insert(
        self, session: Session, batch: JobsInsert, returning: Sequence[str]
    ) -> list[Sequence[Any]]:
        """Insert `batch` in one statement; the new rows of `returning` (``id`` among them), by id.

        Jobs whose key was taken are missing. Ids grow in the batch's order.
        """
        ...

    def jobs_insert_gathered(
        self, session: Session, batch: JobsInsert, returning: Sequence[str]
    ) -> tuple[list[Sequence[Any]], Any]:
        """`jobs_insert` of jobs without own columns or workflow, and the statement's ``now()``.

        The rows come back gathered, cheaper to read than a row per job: ``payload``
        decoded, ``run_at`` the ``now()`` returned where it was ``now()``; that
        ``now()`` is also what every column defaulting to it holds. Not for a model
        with an ARRAY column.
        """
        ...

    def jobs_insert_loaded(self, session: Session, batch: JobsInsert) -> list[JobMixin]:
        """`jobs_insert`, each new row loaded by the ORM (events, ``@reconstructor``), by id."""
        ...

    def jobs_insert_ids(
        self, session: Session, batch: JobsInsert, *, keys: bool = True
    ) -> list[tuple[int, str | None, str | None]]:
        """`jobs_insert` returning only ``(id, idempotency_key, unique_key)`` per new job, by id.

        Without `keys`, no job of `batch` has a key, and both come back None.
        """
        ...

    def jobs_by_keys(
        self, session: Session, keys: Sequence[str], *, unique: bool = False, ids_only: bool = False
    ) -> Sequence[Any]:
        """The jobs holding idempotency `keys` (or with `unique`, the active ones holding them).

        Loaded by the ORM, or with `ids_only` ``(id, idempotency_key, unique_key)`` rows.
        One round trip; a key no job holds is missing.
        """
        ...

    def job_debounce(self, session: Session, debounced: DebouncedJob) -> JobMixin | None:
        """Insert a debounced job, or fold it into the pending job holding its key.

        One statement, atomic among concurrent callers: the folded job takes the new
        payload, and is due a window after now; its other columns stay. Returns
        the job (loaded, the session's copy refreshed), or None: the pending job
        holding the key is of another kind (nothing changed).
        """
        ...

    def job_throttle(self, session: Session, key: str, window: float) -> JobMixin | None:
        """Take throttle `key`'s lock until COMMIT, then its latest job due within `window` s.

        Enqueues of one key take turns: a second sees the first's job once that
        committed. Any status counts. None: the window is free (the caller inserts,
        with ``throttle_key`` set, before its COMMIT).
        """
        ...

    def upstream_lock(self, session: Session, ids: Sequence[int]) -> dict[int, str]:
        """Lock the jobs `ids` until COMMIT, mark them ``has_dependents``; their statuses by id.

        So none of them can end unseen before the caller's COMMIT: its end waits for
        the lock, and its release then sees the new edges. Ids are locked in id
        order (no deadlock between two enqueues); an id of no job is missing.
        """
        ...

    def edges_insert(
        self, session: Session, job_ids: Sequence[int], upstream_ids: Sequence[int]
    ) -> None:
        """Insert the edges ``(job_ids[i] waits for upstream_ids[i])``, in one statement."""
        ...

    def batch_add(self, session: Session, batch_id: int, added: int) -> bool:
        """Make batch callback `batch_id` wait for `added` more jobs; False if it started already.

        A callback whose batch gets no unfinished member stays due.
        """
        ...

    def batch_members(self, session: Session, batch_id: int, ids: Sequence[int]) -> set[int]:
        """Of the jobs `ids`, those batch `batch_id` waits for already (its members)."""
        ...
