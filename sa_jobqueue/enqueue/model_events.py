"""Declared enqueues on model events: ``jobs.enqueue_on(Order, "insert", "send_receipt", ...)``.

The ORM's mapper events (``after_insert``, ``after_update``, ``after_delete``) note each
row event of a flush in its session; once the flush has written every row (the
session's ``after_flush_postexec``), each noted event becomes one ``jobs.enqueue`` in
that session, so the job is written in the transaction that wrote the row: rolled back
with it, committed with it, once per row event. Events a flush notes belong to that
flush only: a flush that fails enqueues nothing (its transaction is rolled back).

ORM bulk statements (``session.execute(insert(Order), [...])``,
``update(Order).where(...)``) and Core statements run no mapper events: they enqueue
nothing. See docs/enqueue.md#enqueue-on-model-events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import event, inspect
from sqlalchemy.exc import NoInspectionAvailable
from sqlalchemy.orm import Mapper, Session, object_session
from sqlalchemy.orm.exc import UnmappedClassError

from sa_jobqueue.core.validation import check_name
from sa_jobqueue.enqueue.prepare import check_options
from sa_jobqueue.errors import ValidationError

if TYPE_CHECKING:
    from sa_jobqueue.enqueue.api import EnqueueAPI

__all__ = ["EVENTS", "ModelEnqueue", "declare"]

#: The row events a declared enqueue can follow, and the mapper event of each.
EVENTS = {"insert": "after_insert", "update": "after_update", "delete": "after_delete"}

#: Where a session keeps the enqueues its running flush has noted.
_NOTED = "sa_jobqueue_noted_enqueues"


@dataclass(eq=False)
class ModelEnqueue:
    """One declared enqueue: on `event` of a row of `model`, enqueue `kind`.

    Attributes:
        jobs: the `JobQueue` that enqueues.
        model: the application's mapped class.
        event: ``"insert"``, ``"update"`` or ``"delete"``.
        kind: the job's kind.
        payload: the row -> the job's payload.
        columns: for ``"update"``: only a change of one of these attributes enqueues
            (empty: a change of any column attribute).
        options: `EnqueueOptions`, each a value or a callable of the row.

    `remove` stops it (a test that declares one on a shared model removes it after).
    """

    jobs: EnqueueAPI[Any]
    model: type[Any]
    event: str
    kind: str
    payload: Callable[[Any], Any]
    columns: tuple[str, ...]
    options: Mapping[str, Any]

    def remove(self) -> None:
        """Stop listening: rows written from now on enqueue nothing for this declaration."""
        if event.contains(self.model, EVENTS[self.event], self.noted):
            event.remove(self.model, EVENTS[self.event], self.noted)

    def noted(self, mapper: Mapper[Any], connection: Any, row: Any) -> None:
        """The mapper event's listener: note this row event in the row's session."""
        if self.event == "update" and not self._changed(row):
            return
        session = object_session(row)
        if session is None:  # a flush always has a session; kept for the type checker
            return
        # The payload is read now, while the flush's values are the row's.
        payload = self.payload(row)
        options = {k: (v(row) if callable(v) else v) for k, v in self.options.items()}
        session.info.setdefault(_NOTED, []).append((self, payload, options))

    def _changed(self, row: Any) -> bool:
        state = inspect(row)
        names = self.columns or tuple(a.key for a in state.mapper.column_attrs)
        return any(state.attrs[name].history.has_changes() for name in names)


def _enqueue_noted(session: Session, flush_context: Any) -> None:
    """After a flush: each noted row event becomes one enqueue, in the flush's transaction."""
    noted = session.info.pop(_NOTED, None)
    for declared, payload, options in noted or ():
        declared.jobs.enqueue(session, declared.kind, payload, **options)


def _forget_noted(session: Session, *args: Any) -> None:
    """Drop what a failed flush noted: a new flush, or a rollback (a savepoint's too)."""
    session.info.pop(_NOTED, None)


_installed = False


def _install() -> None:
    """Listen on every Session once: enqueue what a flush noted; forget what a failed one did."""
    global _installed
    if _installed:
        return
    event.listen(Session, "before_flush", _forget_noted)
    event.listen(Session, "after_flush_postexec", _enqueue_noted)
    event.listen(Session, "after_soft_rollback", _forget_noted)
    _installed = True


def declare(
    jobs: EnqueueAPI[Any],
    model: object,
    on: object,
    kind: object,
    payload: object,
    columns: object = (),
    options: Mapping[str, Any] | None = None,
) -> ModelEnqueue:
    """Check a declared enqueue's arguments, then listen for its row events.

    Raises:
        ValidationError: `model` is not a mapped class, `on` is not an event of
            `EVENTS`, `kind` is not a valid name, `payload` is not callable, or
            `columns` (for ``"update"`` only) names no column attribute of `model`.
        TypeError: an option `jobs.enqueue` does not take.
    """
    try:
        mapper = inspect(model) if isinstance(model, type) else None
    except (NoInspectionAvailable, UnmappedClassError):
        mapper = None
    if not isinstance(mapper, Mapper):
        raise ValidationError("model", model, "must be a mapped class (a declarative model)")
    if on not in EVENTS:
        raise ValidationError("on", on, f"must be one of {', '.join(map(repr, EVENTS))}")
    check_name("kind", kind)
    if not callable(payload):
        raise ValidationError(
            "payload", payload, "must be a callable of the row (lambda row: {...})"
        )
    names = _columns(mapper, on, columns)
    options = dict(options or {})
    check_options("enqueue_on", options)
    declared = ModelEnqueue(
        jobs=jobs,
        model=mapper.class_,
        event=str(on),
        kind=str(kind),
        payload=payload,
        columns=names,
        options=options,
    )
    _install()
    event.listen(declared.model, EVENTS[declared.event], declared.noted, propagate=True)
    return declared


def _columns(mapper: Mapper[Any], on: object, columns: object) -> tuple[str, ...]:
    if isinstance(columns, str) or not isinstance(columns, Sequence):
        raise ValidationError("columns", columns, "must be a list of attribute names")
    if columns and on != "update":
        raise ValidationError("columns", columns, 'is for on="update" only')
    known = {attr.key for attr in mapper.column_attrs}
    unknown = [name for name in columns if name not in known]
    if unknown:
        raise ValidationError(
            "columns",
            list(columns),
            f"{', '.join(map(repr, unknown))} is not a column attribute of "
            f"{mapper.class_.__name__} (it has {', '.join(sorted(known))})",
        )
    return tuple(str(name) for name in columns)
