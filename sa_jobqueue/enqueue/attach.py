"""Inserted rows made persistent objects, as if the ORM had loaded them.

`attach` builds the mapped object for one row an INSERT returned, from what was sent (its
`JobSpec`) and what the database filled, and puts it in the session's identity map
without a flush or a second statement; `attach_all` does it for a batch. `One` is an
INSERT with what it returns. `sa_jobqueue.enqueue.insert` decides when nothing could tell
the difference from an ORM load. See docs/enqueue.md#what-enqueue-does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import DefaultClause
from sqlalchemy.orm import Mapper, Session, make_transient_to_detached
from sqlalchemy.orm.attributes import instance_dict, instance_state

from sa_jobqueue.core import sqlalchemy_private
from sa_jobqueue.driver.protocol.enqueue import InsertShape
from sa_jobqueue.enqueue.prepare import JobSpec
from sa_jobqueue.schema.model import Status

__all__ = [
    "NULL_COLUMNS",
    "SET_COLUMNS",
    "One",
    "attach",
    "attach_all",
    "defaults_to_now",
]

#: The columns a new job leaves NULL: one enqueue knows them without asking.
NULL_COLUMNS = (
    "locked_until",
    "locked_by",
    "last_error",
    "finished_at",
    "result",
    "trace_context",
    "waiting_for",
    "after_failure",
    "has_dependents",
    "debounce_key",
    "throttle_key",
    "progress",
    "has_steps",
)
#: The columns one enqueue sets from its `JobSpec` (and the constants beside them).
SET_COLUMNS = (
    "kind",
    "queue",
    "status",
    "priority",
    "attempts",
    "max_attempts",
    "idempotency_key",
    "unique_key",
    "concurrency_key",
)


_NULLS = dict.fromkeys(NULL_COLUMNS)


def defaults_to_now(column: Any) -> bool:
    """Whether `column`'s server default is ``now()``: a new row holds the statement's now."""
    default = column.server_default
    return isinstance(default, DefaultClause) and str(default.arg) == "now()"


_PENDING = Status.PENDING.value


@dataclass(frozen=True)
class One:
    """The INSERT of one job (or a batch) with a given set of extra columns, and what it returns."""

    #: What the driver is asked to insert and return (`Driver.job_insert`).
    shape: InsertShape
    #: The attribute each returned column fills, in order.
    returned: tuple[str, ...]
    #: The model's attributes a row leaves unloaded (its relationships): expired.
    unloaded: frozenset[str]
    #: The first item of the model's identity keys (``Mapper.identity_key_from_primary_key``).
    identity_class: type[Any]


def attach(
    session: Session,
    mapper: Mapper[Any],
    spec: JobSpec,
    one: One,
    row: Sequence[Any],
    shared: Mapping[str, Any] | None = None,
) -> Any:
    """The persistent object for the row just inserted, in `session`'s identity map."""
    values: dict[str, Any] = {
        **_NULLS,
        **(shared or {}),
        "kind": spec.kind,
        "queue": spec.queue,
        "status": _PENDING,
        "priority": spec.priority,
        "attempts": 0,
        "max_attempts": spec.max_attempts,
        "idempotency_key": spec.idempotency_key,
        "unique_key": spec.unique_key,
        "concurrency_key": spec.concurrency_key,
    }
    values.update(zip(one.returned, row, strict=True))
    # identity_key_from_primary_key's key, for the one-column primary key
    # (`Inserter._plain_model`) and no identity token.
    key = (one.identity_class, (values["id"],), None)
    existing = session.identity_map.get(key)
    if existing is not None:
        return existing  # as an ORM load would: the session's object wins
    job = mapper.class_manager.new_instance()
    instance_dict(job).update(values)
    events = session.dispatch
    if events.before_attach or events.after_attach or events.detached_to_persistent:
        make_transient_to_detached(job)  # history clear, identity key set: as loaded
        session.add(job)  # which tells those listeners
        return job
    # As an ORM load leaves it: persistent, with no history, no cascade and no event.
    sqlalchemy_private.add_as_loaded(session, job, instance_state(job), key, one.unloaded)
    return job


def attach_all(
    session: Session,
    mapper: Mapper[Any],
    one: One,
    matched: Sequence[tuple[JobSpec, Sequence[Any]]],
    shared: dict[str, Any],
) -> list[Any]:
    """`attach` for each ``(spec, row)`` of a batch, with what they share looked up once.

    `shared` holds the values of attributes every row takes (not in `one.returned`).
    """
    events = session.dispatch
    if (
        events.before_attach
        or events.after_attach
        or events.detached_to_persistent
        or not sqlalchemy_private.ADDS_WITHOUT_EVENTS
    ):
        return [attach(session, mapper, spec, one, row, shared) for spec, row in matched]
    identity_map = session.identity_map
    identity_class = one.identity_class
    new_instance = mapper.class_manager.new_instance
    add_as_loaded = sqlalchemy_private.add_as_loaded
    returned, unloaded = one.returned, one.unloaded
    id_at = returned.index("id")
    # What every new row holds alike; the spec's own values follow.
    common = {**_NULLS, **shared, "status": _PENDING, "attempts": 0}
    jobs: list[Any] = []
    for spec, row in matched:
        # identity_key_from_primary_key's key, for the one-column primary key
        # (`_plain_model`) and no identity token.
        key = (identity_class, (row[id_at],), None)
        existing = identity_map.get(key)
        if existing is not None:
            jobs.append(existing)  # as an ORM load would: the session's object wins
            continue
        job = new_instance()
        values = instance_dict(job)
        values.update(common)
        values["kind"] = spec.kind
        values["queue"] = spec.queue
        values["priority"] = spec.priority
        values["max_attempts"] = spec.max_attempts
        values["idempotency_key"] = spec.idempotency_key
        values["unique_key"] = spec.unique_key
        values["concurrency_key"] = spec.concurrency_key
        values.update(zip(returned, row, strict=True))
        add_as_loaded(session, job, instance_state(job), key, unloaded)  # as `attach` does
        jobs.append(job)
    return jobs
