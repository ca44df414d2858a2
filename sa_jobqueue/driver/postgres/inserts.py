"""The enqueue statements: one job, many jobs, and the lookups of keys already taken.

`sa_jobqueue.driver.postgres.enqueue.PostgresEnqueue` builds them on first use and runs
them; `enqueue_params` builds what they are sent. See docs/enqueue.md#what-enqueue-does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    Integer,
    Select,
    SmallInteger,
    Text,
    bindparam,
    case,
    cast,
    column,
    func,
    literal,
    literal_column,
    null,
    select,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TIMESTAMP, aggregate_order_by
from sqlalchemy.dialects.postgresql import Insert as PgInsert
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.sql.dml import ReturningInsert

from sa_jobqueue.schema.model import ACTIVE, JobMixin, Status
from sa_jobqueue.statements.common import (
    seconds,
    unnest_rows,
)

__all__ = [
    "by_keys",
    "by_unique_keys",
    "enqueue",
    "enqueue_json",
    "enqueue_json_arrays",
    "enqueue_json_ids",
    "enqueue_one",
]


#: The columns both batched INSERTs fill, in the order of their SELECT's values.
_INSERTED_COLUMNS = (
    "kind",
    "queue",
    "payload",
    "priority",
    "max_attempts",
    "run_at",
    "idempotency_key",
    "unique_key",
    "status",
    "attempts",
    "concurrency_key",
)


def enqueue(
    model: type[JobMixin], *, extra: Sequence[str] = (), workflow: bool = False
) -> PgInsert:
    """Insert a batch of jobs; a taken idempotency key, or active unique key, inserts nothing.

    Parameters (arrays of equal length, one element per job): ``kinds``, ``queues``,
    ``payloads`` (JSON text), ``priorities``, ``max_attempts_list``, ``run_ats`` (NULL
    for "now plus delay"), ``delays`` (seconds), ``keys``, ``unique_keys``,
    ``concurrency_keys``. Returns the inserted rows, in insertion order of their ids.

    ``ON CONFLICT DO NOTHING`` names no target, so both arbiters apply: the unique
    constraint on ``idempotency_key`` and the partial unique index on ``unique_key``
    over pending and running rows. Neither raises, so a conflict never aborts the
    caller's transaction.

    Each column named in `extra` (the application's own columns, ``trace_context``)
    takes one more array, ``:<column>_values``: of the column's type, or of JSON text
    for a JSON column.

    With `workflow` (jobs enqueued ``after=`` others, or into a batch) five more
    arrays set what `enqueue.workflows` decided for each job: ``statuses``
    (``pending``, ``waiting``, or ``cancelled`` when an upstream job failed already),
    ``waiting_fors``, ``after_failures``, ``has_dependents_list`` and ``last_errors``;
    a job inserted ``cancelled`` gets ``finished_at = now()``.
    """
    table = model.__table__
    extras = [table.c[name] for name in extra]
    flow = (
        (
            ("statuses", "status", Text),
            ("waiting_fors", "waiting_for", Integer),
            ("after_failures", "after_failure", Text),
            ("has_dependents_list", "has_dependents", Boolean),
            ("last_errors", "last_error", Text),
        )
        if workflow
        else ()
    )
    batch = unnest_rows(
        ("kinds", "kind", Text),
        ("queues", "queue", Text),
        ("payloads", "payload", Text),
        ("priorities", "priority", SmallInteger),
        ("max_attempts_list", "max_attempts", Integer),
        ("run_ats", "run_at", TIMESTAMP(timezone=True)),
        ("delays", "delay", Float),
        ("keys", "key", Text),
        ("unique_keys", "unique_key", Text),
        ("concurrency_keys", "concurrency_key", Text),
        *flow,
        *((f"{c.name}_values", f"extra_{c.name}", Text if _is_json(c) else c.type) for c in extras),
    )
    extra_values = [
        cast(batch.c[f"extra_{c.name}"], c.type) if _is_json(c) else batch.c[f"extra_{c.name}"]
        for c in extras
    ]
    rows = select(
        batch.c.kind,
        batch.c.queue,
        cast(batch.c.payload, JSONB),
        batch.c.priority,
        batch.c.max_attempts,
        func.coalesce(batch.c.run_at, func.now() + seconds(batch.c.delay)),
        batch.c.key,
        batch.c.unique_key,
        batch.c.status if workflow else literal(Status.PENDING.value, Text),
        literal(0, Integer),
        batch.c.concurrency_key,
        *extra_values,
    )
    if workflow:
        cancelled = batch.c.status == Status.CANCELLED.value
        rows = rows.add_columns(
            batch.c.waiting_for,
            batch.c.after_failure,
            batch.c.has_dependents,
            batch.c.last_error,
            case((cancelled, func.now()), else_=null()),
        )
    columns = [*_INSERTED_COLUMNS, *(c.name for c in extras)]
    if workflow:
        columns += ["waiting_for", "after_failure", "has_dependents", "last_error", "finished_at"]
    return pg_insert(model).from_select(columns, rows).on_conflict_do_nothing()


#: The fields of one job in `enqueue_json`'s ``:rows``, with their SQL types.
JSON_FIELDS = (
    ("kind", Text),
    ("queue", Text),
    ("payload", JSONB),
    ("priority", SmallInteger),
    ("max_attempts", Integer),
    ("run_at", TIMESTAMP(timezone=True)),
    ("delay", Float),
    ("idempotency_key", Text),
    ("unique_key", Text),
    ("concurrency_key", Text),
)


def enqueue_json(model: type[JobMixin], *, traced: bool = False) -> PgInsert:
    """`enqueue`'s batch of jobs from one parameter: ``:rows``, a JSON array of objects.

    Each object holds one job's fields, by the names of `JSON_FIELDS`: ``kind``,
    ``queue``, ``payload`` (the JSON value itself), ``priority`` and ``max_attempts``,
    and when set ``run_at`` (an ISO 8601 string with its offset) or ``delay`` (seconds),
    ``idempotency_key``, ``unique_key``, ``concurrency_key``; a field left out is NULL.
    The same rows, defaults and ``ON CONFLICT DO NOTHING`` as `enqueue`. With `traced`,
    every row gets ``:trace_context`` (JSON text).

    Why one JSON parameter rather than an array per column: the driver encodes a
    Python list element by element in Python, ten arrays of 1,000 jobs are 10,000
    values, while one string is sent as it is and the server parses it in C
    (bench/enqueue-results.md).
    """
    batch = (
        func.jsonb_to_recordset(cast(bindparam("rows", type_=Text), JSONB))
        .table_valued(*(column(name, type_) for name, type_ in JSON_FIELDS))
        .render_derived(name="batch", with_types=True)
    )
    delay = func.coalesce(batch.c.delay, literal_column("0", Float))
    values = [
        batch.c.kind,
        batch.c.queue,
        batch.c.payload,
        batch.c.priority,
        batch.c.max_attempts,
        func.coalesce(batch.c.run_at, func.now() + seconds(delay)),
        batch.c.idempotency_key,
        batch.c.unique_key,
        literal_column(f"'{Status.PENDING.value}'", Text),
        literal_column("0", Integer),
        batch.c.concurrency_key,
    ]
    columns = list(_INSERTED_COLUMNS)
    if traced:
        values.append(cast(bindparam("trace_context", type_=Text), JSONB))
        columns.append("trace_context")
    rows = select(*values).select_from(batch)
    return pg_insert(model).from_select(columns, rows).on_conflict_do_nothing()


def enqueue_json_arrays(
    model: type[JobMixin], *, traced: bool = False, returning: Sequence[str] = ("id",)
) -> Select[Any]:
    """`enqueue_json`, returning its rows as one row of arrays, and ``now()`` once.

    The row holds one array per column named in `returning`, in that order, each in
    id order (the batch's order, less the jobs whose key was taken): ``payload`` as
    JSON text, ``run_at`` NULL where it is ``now()``. Then ``now()`` itself: the value
    of every column a new job takes from its default ``now()`` (``created_at``,
    ``updated_at``). Why: loading a ``timestamptz`` costs the driver more than the rest
    of a row, and ``RETURNING`` would send three of them per job, nearly all equal to
    ``now()``; the arrays come back as one row. Over zero inserted jobs, each array is
    NULL.
    """
    table = model.__table__
    names = list(returning)
    inserted = enqueue_json(model, traced=traced).returning(
        *(table.c[name] for name in dict.fromkeys(["id", *names]))
    )
    rows = inserted.cte("inserted")
    by_id = rows.c.id

    def returned(name: str) -> Any:
        if name == "payload":
            return cast(rows.c.payload, Text)
        if name == "run_at":
            return func.nullif(rows.c.run_at, func.now())
        return rows.c[name]

    arrays: list[Any] = [
        func.array_agg(aggregate_order_by(returned(name), by_id)).label(name) for name in names
    ]
    arrays.append(func.now().label("now"))
    return select(*arrays)


def enqueue_json_ids(
    model: type[JobMixin], *, traced: bool = False, keys: bool = True
) -> Select[Any]:
    """`enqueue_json`, returning the new jobs' ids as one array: ``ids_only`` batches.

    One row: ``id``, the array of the ids inserted, and with `keys` ``idempotency_key``
    and ``unique_key``, the arrays of their keys. The arrays are in no set order, but
    in one same order (one aggregate pass over the inserted rows fills them all): the
    caller sorts by id. Over zero inserted jobs, each array is NULL.

    Why not `enqueue_json_arrays`: each ``array_agg(... ORDER BY id)`` sorts the rows
    again, and a batch without keys needs no key arrays (they would be all NULL),
    nor ``now()``: together about 1 ms of the server's 10 ms for 1,000 keyless jobs,
    where sorting 1,000 ids that come in order costs Python microseconds.
    """
    table = model.__table__
    names = ["id", "idempotency_key", "unique_key"] if keys else ["id"]
    rows = enqueue_json(model, traced=traced).returning(*(table.c[name] for name in names))
    inserted = rows.cte("inserted")
    arrays: list[Any] = [func.array_agg(inserted.c[name]).label(name) for name in names]
    return select(*arrays)


def enqueue_one(
    model: type[JobMixin],
    *,
    timing: str = "now",
    keys: Sequence[str] = (),
    extra: Sequence[str] = (),
    returning: Sequence[str] = ("id",),
    as_text: Sequence[str] = (),
) -> ReturningInsert[Any]:
    """Insert one job from scalar parameters: `enqueue` for a batch of one, but cheaper.

    The same row, defaults and ``ON CONFLICT DO NOTHING`` as `enqueue`, written as
    ``INSERT ... VALUES`` with only the columns this job sets: one enqueue per
    transaction is the common case, and a short statement with plain parameters
    spares the driver, SQLAlchemy's statement cache and the server the arrays and
    the ``unnest``. Parameters: ``new_kind``, ``new_queue``, ``new_payload`` (JSON
    text), ``new_priority``, ``new_max_attempts``; then by `timing`, nothing
    (``"now"``: the column default, ``now()``), ``new_run_at`` (``"at"``) or
    ``new_delay`` in seconds (``"after"``: ``now()`` plus that); ``new_<column>``
    for each of `keys` (``idempotency_key``, ``unique_key``, ``concurrency_key``:
    the others stay NULL), and for each column in `extra` (of the column's type,
    or JSON text for a JSON column). Returns the columns named in `returning` (those
    also in `as_text` cast to text, under their own name: a JSON column then comes
    back as its text, for the caller to decode), or no row when a key was taken.
    """
    table = model.__table__
    given = new_job_values()
    if timing == "at":
        given["run_at"] = bindparam("new_run_at", type_=TIMESTAMP(timezone=True))
    elif timing == "after":
        given["run_at"] = func.now() + seconds(bindparam("new_delay", type_=Float))
    elif timing != "now":
        raise ValueError(f"timing must be 'now', 'at' or 'after', not {timing!r}")
    for name in keys:
        given[name] = bindparam(f"new_{name}", type_=Text)
    given.update(own_values(model, extra))
    insert = pg_insert(model).values(given).on_conflict_do_nothing()
    return insert.returning(
        *(
            cast(table.c[name], Text).label(name) if name in as_text else table.c[name]
            for name in returning
        )
    )


def _is_json(column: Any) -> bool:
    return isinstance(column.type, JSON)


def by_keys(model: type[JobMixin]) -> Select[Any]:
    """Jobs whose idempotency key is in ``:keys`` (an array)."""
    return select(model).where(
        model.idempotency_key == func.any(bindparam("keys", type_=ARRAY(Text)))
    )


def by_unique_keys(model: type[JobMixin]) -> Select[Any]:
    """Active (pending or running) jobs whose unique key is in ``:unique_keys`` (an array)."""
    return select(model).where(
        model.unique_key == func.any(bindparam("unique_keys", type_=ARRAY(Text))),
        model.status.in_([s.value for s in ACTIVE]),
    )


def new_job_values() -> dict[str, Any]:
    """The values of a new pending job's own columns, as one-row INSERTs bind them.

    ``new_kind``, ``new_queue``, ``new_payload`` (JSON text), ``new_priority`` and
    ``new_max_attempts``; status and attempts are constants written into the SQL, so
    the statement is the same for every job. The caller adds ``run_at`` and the keys.
    """
    return {
        "kind": bindparam("new_kind", type_=Text),
        "queue": bindparam("new_queue", type_=Text),
        "payload": cast(bindparam("new_payload", type_=Text), JSONB),
        "status": literal_column(f"'{Status.PENDING.value}'", Text),
        "priority": bindparam("new_priority", type_=SmallInteger),
        "attempts": literal_column("0", Integer),
        "max_attempts": bindparam("new_max_attempts", type_=Integer),
    }


def own_values(model: type[JobMixin], extra: Sequence[str]) -> dict[str, Any]:
    """``new_<column>`` for each of the app's own columns `extra` (JSON text for a JSON one)."""
    table = model.__table__
    values: dict[str, Any] = {}
    for name in extra:
        column = table.c[name]
        if _is_json(column):
            values[name] = cast(bindparam(f"new_{name}", type_=Text), column.type)
        else:
            values[name] = bindparam(f"new_{name}", type_=column.type)
    return values
