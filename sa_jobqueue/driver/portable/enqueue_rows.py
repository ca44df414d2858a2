"""New jobs as portable INSERTs: each job's values, and the INSERT that takes a batch of them.

`job_values` is one job's row (times from the database clock); `RowInserter` inserts
rows in multi-row ``INSERT ... VALUES`` statements and returns the new rows' columns.

Keys: a taken idempotency key, or a unique key an active job holds, makes the INSERT
fail with a duplicate key (`Dialect.duplicate`). SQLite and InnoDB undo only that
statement, so the caller's transaction goes on; the statement's rows are then inserted
one by one, and those whose key was taken are left out, as PostgreSQL's ``ON CONFLICT
DO NOTHING`` leaves them out. On MySQL the INSERT waits, as PostgreSQL's does, for a
concurrent transaction holding the key uncommitted.

Ids: SQLite and MariaDB (>= 10.5) return the rows (``INSERT ... RETURNING``). A batch
(`batch_params`), and a single job (`job_params`), then run as one statement kept per
shape of row (when each job is due, whether it is cancelled), given the rows as
parameters: SQLAlchemy sends them as one multi-row VALUES ("insertmanyvalues") and
compiles the statement once, where a multi-row ``.values()`` has no cache key and is
compiled at each call (1,000 jobs: 4-6x faster on SQLite, 2-5x on MariaDB,
bench/databases-results.md). MySQL 8 has no RETURNING: one multi-row INSERT of n rows
(a "simple insert", its row count known in advance) takes n consecutive AUTO_INCREMENT
values under every ``innodb_autoinc_lock_mode``, the first being the cursor's
``lastrowid``; a SELECT of those ids then reads what the database filled. With
``auto_increment_increment`` other than 1 (Galera) the ids are not consecutive: the
SELECT finds fewer rows and the insert fails loudly. Why not a statement per row: 1,000
jobs on MariaDB here took 0.4-0.5 s as one multi-row INSERT and its SELECT, 1.7-2.8 s as
an INSERT and a SELECT per job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from sqlalchemy import JSON, Connection, Float, Text, bindparam, insert, literal, null, select
from sqlalchemy.exc import IntegrityError

from sa_jobqueue.driver.portable.sql import Dialect
from sa_jobqueue.driver.protocol.enqueue import JobsInsert, NewJob
from sa_jobqueue.errors import JobQueueError
from sa_jobqueue.schema.columns import dumps
from sa_jobqueue.schema.model import Status
from sa_jobqueue.schema.types import Timestamp

__all__ = [
    "JobParams",
    "RowInserter",
    "batch_params",
    "job_params",
    "job_values",
    "json_text",
    "run_at_of",
]

#: Bound parameters per statement at most: SQLite's default limit is 32,766 (>= 3.32).
_MAX_PARAMETERS = 30_000


def json_text(value: str | None) -> Any:
    """JSON text bound as text (a JSON column would encode the string again); None: NULL."""
    return null() if value is None else literal(value, Text)


def run_at_of(sql: Dialect, job: NewJob, now: Any, timing: str | None = None) -> Any:
    """When `job` is due: its ``run_at``, or `now` plus its delay (`timing` forces one)."""
    if timing is None:
        timing = "at" if job.run_at is not None else "after" if job.delay else "now"
    if timing == "at":
        return literal(job.run_at, Timestamp())
    if timing == "after":
        return sql.plus_seconds(now, literal(job.delay, Float))
    if timing != "now":
        raise ValueError(f"timing must be 'now', 'at' or 'after', not {timing!r}")
    return now


def job_values(
    table: Any,
    sql: Dialect,
    job: NewJob,
    now: Any,
    *,
    timing: str | None = None,
    keys: Iterable[str] = ("idempotency_key", "unique_key", "concurrency_key"),
    columns: Mapping[str, Any] | None = None,
    workflow: bool = False,
) -> dict[str, Any]:
    """One new job's row: its fields, ``run_at`` from `now` (the database clock), `keys`.

    `columns` are the application's own columns (and ``trace_context``) by name,
    JSON text for a JSON column; `workflow` sets the workflow columns the job carries
    (a job inserted ``cancelled`` ends at `now`).
    """
    values: dict[str, Any] = {
        "kind": job.kind,
        "queue": job.queue,
        "payload": json_text(job.payload),
        "status": job.status if workflow else Status.PENDING.value,
        "priority": job.priority,
        "attempts": 0,
        "max_attempts": job.max_attempts,
        "run_at": run_at_of(sql, job, now, timing),
    }
    for name in keys:
        values[name] = getattr(job, name)
    if workflow:
        values["waiting_for"] = job.waiting_for
        values["after_failure"] = job.after_failure if job.after else None
        values["has_dependents"] = job.has_dependents
        values["last_error"] = job.last_error
        values["finished_at"] = now if job.status == Status.CANCELLED.value else null()
    for name, value in (columns or {}).items():
        column = table.c[name]
        values[name] = (
            json_text(value) if isinstance(column.type, JSON) else literal(value, column.type)
        )
    return values


def own_json(table: Any, job: NewJob, trace_context: Mapping[str, str] | None) -> dict[str, Any]:
    """`job`'s own columns (and `trace_context`) by name, JSON columns as JSON text."""
    columns: dict[str, Any] = {}
    for name, value in job.columns:
        json_column = isinstance(table.c[name].type, JSON) and value is not None
        columns[name] = dumps(value) if json_column else value
    if trace_context:
        columns["trace_context"] = dumps(dict(trace_context))
    return columns


class JobParams(NamedTuple):
    """One new job as bound parameters (`batch_params`), for a statement of its `shape`.

    ``shape`` is ``(timing, cancelled, texts)``: when it is due (``"now"``, ``"at"``:
    ``params["run_at"]``, ``"after"``: now plus ``params["sajq_delay"]``), whether it
    ends at once (a workflow job inserted cancelled), and the columns bound as JSON
    text (``params["sajq_<name>"]``). Its other params are columns by name.
    """

    shape: tuple[str, bool, tuple[str, ...]]
    params: dict[str, Any]


def _common_params(job: NewJob, status: str) -> dict[str, Any]:
    """The parameters every new job's row has (its payload as JSON text), with `status`."""
    return {
        "kind": job.kind,
        "queue": job.queue,
        "sajq_payload": job.payload,
        "status": status,
        "priority": job.priority,
        "attempts": 0,
        "max_attempts": job.max_attempts,
    }


def batch_params(table: Any, batch: JobsInsert) -> list[JobParams]:
    """The jobs of `batch` as `JobParams`, in order: what `job_values` makes, as parameters."""
    texts = ["payload"]
    plain: list[str] = []
    for name in batch.columns:
        (texts if isinstance(table.c[name].type, JSON) else plain).append(name)
    trace = dumps(dict(batch.trace_context)) if batch.trace_context else None
    if trace is not None:
        texts.append("trace_context")
    text_names = tuple(texts)
    workflow, columns, pending = batch.workflow, batch.columns, Status.PENDING.value
    out: list[JobParams] = []
    for index, job in enumerate(batch.jobs):
        params = _common_params(job, job.status if workflow else pending)
        params["idempotency_key"] = job.idempotency_key
        params["unique_key"] = job.unique_key
        params["concurrency_key"] = job.concurrency_key
        if job.run_at is not None:
            timing = "at"
            params["run_at"] = job.run_at
        elif job.delay:
            timing = "after"
            params["sajq_delay"] = job.delay
        else:
            timing = "now"
        cancelled = False
        if workflow:
            params["waiting_for"] = job.waiting_for
            params["after_failure"] = job.after_failure if job.after else None
            params["has_dependents"] = job.has_dependents
            params["last_error"] = job.last_error
            cancelled = job.status == Status.CANCELLED.value
        for name in plain:
            params[name] = columns[name][index]
        for name in text_names[1:]:
            params[f"sajq_{name}"] = trace if name == "trace_context" else columns[name][index]
        out.append(JobParams((timing, cancelled, text_names), params))
    return out


def job_params(
    table: Any, job: NewJob, timing: str, keys: Iterable[str], columns: Mapping[str, Any]
) -> JobParams:
    """One job as `JobParams` (`EnqueueOps.job_insert`): due by `timing`, only `keys` set.

    `columns` are its own columns (and ``trace_context``) by name, JSON text for a JSON
    column (`own_json`): the row `job_values` makes with the same arguments, as parameters.
    """
    params = _common_params(job, Status.PENDING.value)
    for name in keys:
        params[name] = getattr(job, name)
    if timing == "at":
        params["run_at"] = job.run_at
    elif timing == "after":
        params["sajq_delay"] = job.delay
    elif timing != "now":
        raise ValueError(f"timing must be 'now', 'at' or 'after', not {timing!r}")
    texts = ["payload"]
    for name, value in columns.items():
        if isinstance(table.c[name].type, JSON):
            texts.append(name)
            params[f"sajq_{name}"] = value
        else:
            params[name] = value
    return JobParams((timing, False, tuple(texts)), params)


#: ``rows(now, start, stop)``: the rows of the jobs ``[start:stop]`` to insert, their
#: times from `now` (`job_values`).
RowsOf = Callable[[Any, int, int], list[dict[str, Any]]]


class RowInserter:
    """Inserts rows of new jobs into `table` on a `Dialect`'s database.

    Args:
        table: the jobs table.
        sql: the database's `Dialect`.
    """

    def __init__(self, table: Any, sql: Dialect) -> None:
        self.table = table
        self.sql = sql
        #: The INSERTs of `JobParams` by (shape, returned columns, now bound), kept.
        self._statements: dict[tuple[Any, ...], Any] = {}

    def insert(
        self,
        conn: Connection,
        count: int,
        rows_of: RowsOf,
        returning: Sequence[str],
        params: Sequence[JobParams] | None = None,
    ) -> tuple[list[Sequence[Any]], Any]:
        """Insert the `count` rows `rows_of` builds; the new ones' `returning`, by id, and now.

        Rows whose key was taken are missing. Every row shares one ``now()``: that of
        the first statement that inserted one, given to the later ones (a large batch
        takes several; a batch with a taken key, one per row); it is returned too
        (None when no row was inserted). With `params` (the same rows as `batch_params`)
        on a database with ``INSERT ... RETURNING``, a statement kept per shape runs
        with the rows' parameters (`_insert_params`) instead of a multi-row VALUES
        compiled each time.
        """
        wanted = list(dict.fromkeys(["id", *returning, "created_at"]))
        at = [wanted.index(name) for name in returning]
        created_at = wanted.index("created_at")
        if count == 0:
            return [], None
        if params is not None and not conn.dialect.insert_returning:
            params = None  # MySQL: ids from lastrowid, one multi-row VALUES at a time
        if params is not None:
            width = len(params[0].params) + 4  # and now (thrice) and a delay
        else:  # a row's values, each a parameter or a few (run_at's arithmetic)
            width = 3 * len(rows_of(self.sql.now(), 0, 1)[0])
        per_statement = max(1, _MAX_PARAMETERS // width)
        now: Any = None
        inserted: list[Sequence[Any]] = []

        def insert_free(start: int, stop: int) -> list[Sequence[Any]] | None:
            """Rows ``[start:stop]`` in one statement; None: a key was taken (none inserted)."""
            nonlocal now
            try:
                if params is not None:
                    got = self._insert_params(conn, params[start:stop], wanted, now)
                else:
                    got = self._insert(conn, self._rows(rows_of, start, stop, now), wanted)
            except IntegrityError as error:
                if not self.sql.duplicate(error):
                    raise
                return None  # the statement was undone alone: the transaction goes on
            if got and now is None:
                now = got[0][created_at]
            return got

        for start, stop in _runs(count, per_statement, params):
            got = insert_free(start, stop)
            if got is None and stop - start > 1:  # one by one, leaving out the taken keys
                got = [
                    row
                    for index in range(start, stop)
                    for row in insert_free(index, index + 1) or ()
                ]
            inserted += got or ()
        inserted.sort(key=lambda row: row[0])
        return [[row[i] for i in at] for row in inserted], now

    def _rows(self, rows_of: RowsOf, start: int, stop: int, now: Any) -> list[dict[str, Any]]:
        """Rows ``[start:stop]`` of `rows_of`, at the database's now() or at `now` if set."""
        when = self.sql.now() if now is None else literal(now, Timestamp())
        rows = rows_of(when, start, stop)
        if now is not None:  # the first statement's now() throughout
            for row in rows:
                row["created_at"] = row["updated_at"] = when
        return rows

    def _insert_params(
        self, conn: Connection, jobs: Sequence[JobParams], wanted: list[str], now: Any
    ) -> list[Sequence[Any]]:
        """One INSERT of `jobs` (one shape) with RETURNING: the statement is compiled once.

        SQLAlchemy runs a list of parameters as one multi-row VALUES ("insertmanyvalues"),
        in pages of at most the rows given here, so the rows share one now().
        """
        shape = jobs[0].shape
        key = (shape, tuple(wanted), now is not None)
        statement = self._statements.get(key)
        if statement is None:
            statement = self._statements[key] = self._params_statement(shape, wanted, now)
        rows = [job.params for job in jobs]
        if now is not None:
            rows = [{**row, "sajq_now": now} for row in rows]
        options = {"insertmanyvalues_page_size": len(rows)}
        if len(rows) == 1:
            return list(conn.execute(statement, rows[0]).all())
        return list(conn.execute(statement, rows, execution_options=options).all())

    def _params_statement(
        self, shape: tuple[str, bool, tuple[str, ...]], wanted: list[str], now: Any
    ) -> Any:
        """The INSERT of `JobParams` of `shape`: the columns `job_values` computes in SQL."""
        timing, cancelled, texts = shape
        table = self.table
        when: Any = self.sql.now() if now is None else bindparam("sajq_now", type_=Timestamp())
        values: dict[str, Any] = {name: bindparam(f"sajq_{name}", type_=Text) for name in texts}
        if timing == "now":
            values["run_at"] = when
        elif timing == "after":
            values["run_at"] = self.sql.plus_seconds(when, bindparam("sajq_delay", type_=Float))
        if cancelled:
            values["finished_at"] = when
        if now is not None:  # the first statement's now() throughout
            values["created_at"] = values["updated_at"] = when
        columns = [table.c[name] for name in wanted]
        return insert(table).values(values).returning(*columns)

    def _insert(
        self, conn: Connection, rows: list[dict[str, Any]], wanted: list[str]
    ) -> list[Sequence[Any]]:
        """One multi-row INSERT of `rows`; the columns `wanted` of each (``id`` first)."""
        table = self.table
        columns = [table.c[name] for name in wanted]
        # One row as a single-row VALUES, which SQLAlchemy caches compiled (its values
        # are bound parameters); a multi-row VALUES has no cache key.
        statement = insert(table).values(rows[0] if len(rows) == 1 else rows)
        if self.sql.update_returning:  # SQLite: INSERT ... RETURNING too
            return list(conn.execute(statement.returning(*columns)).all())
        first = conn.execute(statement).lastrowid
        last = first + len(rows) - 1
        read = select(*columns).where(table.c.id.between(first, last)).order_by(table.c.id)
        found: list[Sequence[Any]] = list(conn.execute(read).all())
        if len(found) != len(rows):
            raise JobQueueError(
                f"the {len(rows)} jobs inserted did not get consecutive ids from {first}: "
                "set auto_increment_increment to 1 for the jobs table's connections"
            )
        return found


def _runs(count: int, most: int, params: Sequence[JobParams] | None) -> Iterable[tuple[int, int]]:
    """``(start, stop)`` of each statement: at most `most` rows, of one shape in `params`."""
    start = 0
    while start < count:
        stop = min(count, start + most)
        if params is not None:
            shape = params[start].shape
            end = start + 1
            while end < stop and params[end].shape == shape:
                end += 1
            stop = end
        yield start, stop
        start = stop
