"""Session-scoped enqueue: validate, insert in the caller's transaction, never commit.

`prepare` and `prepare_many` check every value (one `JobSpec` per job) before the session
is touched, so a rejected call leaves the caller's transaction usable; `Inserter` then runs
the INSERT. See docs/enqueue.md.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypedDict

from sa_jobqueue.core import validation
from sa_jobqueue.core.limits import check_concurrency_key
from sa_jobqueue.errors import ValidationError
from sa_jobqueue.schema.model import AFTER_FAILURE, DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, JobMixin
from sa_jobqueue.tasks import Registry

log = logging.getLogger("sa_jobqueue.enqueue")

__all__ = [
    "EnqueueOptions",
    "JobSpec",
    "check_ids_only",
    "check_options",
    "prepare",
    "prepare_many",
]


class EnqueueOptions(TypedDict, total=False):
    """The keyword options of `JobQueue.enqueue` and `aenqueue`, each optional.

    An `enqueue_many` item that is a dict takes the same keys, plus ``kind`` and
    ``payload``.

    Attributes:
        queue: default: the task's queue, else ``"default"``.
        priority: lower runs first (a smallint); default 0.
        run_at: when it becomes due (timezone-aware); default now.
        delay: or: due this long after now (a timedelta or seconds).
        max_attempts: default: the task's, else 20.
        idempotency_key: names the side effect; when a job with this key exists
            already, that job is returned unchanged and nothing is inserted.
        unique_key: deduplicates while active: when a ``pending`` or ``running``
            job holds this key, that job is returned unchanged; once it has
            finished, the key is free again. Concurrent callers get one job and
            none of their transactions is aborted.
        concurrency_key: for a task with ``max_running_per_key``: at most that
            many jobs with this key run at once (docs/flow-control.md).
        columns: values for columns the application added to its model
            (``{"order_id": 4}``), by attribute name; checked against the model.
        debounce: ``(key, window)``: enqueues of `key` collapse into one pending
            job, due `window` after the last of them, with the last payload
            (docs/flow-control.md). Not with run_at, delay or the keys above.
        throttle: ``(key, window)``: at most one job of `key` is due per `window`;
            within it, the job there is returned and nothing is inserted
            (docs/flow-control.md). Same exclusions as `debounce`.
        after: jobs (rows `enqueue` returned) or ids this job waits for: it is
            ``waiting`` until every one is ``done``, then due (docs/workflows.md).
            At most `sa_jobqueue.enqueue.workflows.MAX_AFTER` of them.
        after_failure: with `after`: ``"cancel"`` (default: should one of them end
            ``failed`` or ``cancelled``, this job ends ``cancelled``, and so on down
            the graph) or ``"run"`` (it runs once all have ended, however).
    """

    queue: str | None
    priority: int
    run_at: datetime | None
    delay: timedelta | float | None
    max_attempts: int | None
    idempotency_key: str | None
    unique_key: str | None
    concurrency_key: str | None
    columns: Mapping[str, Any] | None
    debounce: tuple[str, timedelta | float] | None
    throttle: tuple[str, timedelta | float] | None
    after: Sequence[JobMixin | int] | None
    after_failure: str | None


#: The keys of an `enqueue_many` dict item (debounce and throttle are for `enqueue` alone).
_OPTIONS = frozenset(
    {"kind", "payload"} | (EnqueueOptions.__optional_keys__ - {"debounce", "throttle"})
)


def check_ids_only(value: object) -> bool:
    """`value` as ``enqueue_many``'s ``ids_only``: True or False, or a `ValidationError`."""
    if not isinstance(value, bool):
        raise ValidationError("ids_only", value, "must be True or False")
    return value


def check_options(call: str, options: Mapping[str, object]) -> None:
    """Refuse a keyword `EnqueueOptions` does not have, as Python does for a signature."""
    for name in options:
        if name not in EnqueueOptions.__optional_keys__:
            raise TypeError(f"{call}() got an unexpected keyword argument {name!r}")


#: Validates ``columns=`` (`OwnColumns.check`): a mapping -> ``(column, value)`` pairs.
ColumnsCheck = Callable[[object], tuple[tuple[str, Any], ...]]
#: Validates ``after=`` (`enqueue.workflows.AfterCheck`): jobs or ids -> sorted unique ids.
AfterCheck = Callable[[object], tuple[int, ...]]


@dataclass(slots=True)
class JobSpec:
    """One validated job, ready to insert; never changed once made (`dataclasses.replace`).

    Not a frozen dataclass: one is built per job enqueued, and a frozen one costs
    five times as much to build.
    """

    kind: str
    queue: str
    payload: str
    priority: int
    max_attempts: int
    run_at: datetime | None
    delay: float
    idempotency_key: str | None
    unique_key: str | None = None
    concurrency_key: str | None = None
    #: The application's own columns: ``(column name, value)`` pairs, sorted by name.
    columns: tuple[tuple[str, Any], ...] = ()
    #: The ids of the jobs it waits for (``after=``), sorted, unique.
    after: tuple[int, ...] = ()
    #: ``"cancel"`` or ``"run"``: what it does when one of them fails.
    after_failure: str = "cancel"
    #: Set by `enqueue.workflows` once the upstream jobs are locked: the row's
    #: workflow columns (``status``, ``waiting_for``, ...) are then inserted too.
    workflow: bool = False
    status: str = "pending"
    waiting_for: int | None = None
    has_dependents: bool | None = None
    last_error: str | None = None


def prepare(
    registry: Registry,
    max_payload_bytes: int,
    kind: object,
    payload: Any = None,
    *,
    queue: object = None,
    priority: object = 0,
    run_at: object = None,
    delay: object = None,
    max_attempts: object = None,
    idempotency_key: object = None,
    unique_key: object = None,
    concurrency_key: object = None,
    columns: object = None,
    check_columns: ColumnsCheck | None = None,
    after: object = None,
    after_failure: object = None,
    check_after: AfterCheck | None = None,
) -> JobSpec:
    """Validate one job's arguments; fill queue and max_attempts from its task."""
    if columns is not None and check_columns is None:
        raise ValidationError("columns", columns, "this queue takes no columns")
    upstream: tuple[int, ...] = ()
    if after is not None:
        if check_after is None:
            raise ValidationError("after", after, "this queue takes no after=")
        upstream = check_after(after)
    rule = _check_after_failure(after_failure, upstream)
    if upstream and unique_key is not None:
        raise ValidationError(
            "unique_key",
            unique_key,
            "cannot be combined with after= (a waiting job holds no unique key); "
            "use an idempotency_key",
        )
    kind = validation.check_name("kind", kind)
    task = registry.get(kind)
    if task is None and (queue is None or max_attempts is None):
        _say_unregistered(registry, kind, queue, max_attempts)
    # The task's queue and max_attempts were checked when it was registered.
    if queue is None:
        queue = task.queue if task else DEFAULT_QUEUE
    else:
        queue = validation.check_name("queue", queue)
    if max_attempts is None:
        max_attempts = task.max_attempts if task and task.max_attempts else DEFAULT_MAX_ATTEMPTS
    else:
        max_attempts = validation.check_max_attempts(max_attempts)
    if run_at is not None and delay is not None:
        raise ValidationError("delay", delay, "give either run_at or delay, not both")
    return JobSpec(
        kind=kind,
        queue=queue,
        payload=validation.dump_payload({} if payload is None else payload, max_payload_bytes),
        priority=validation.check_priority(priority),
        max_attempts=max_attempts,
        run_at=None if run_at is None else validation.check_aware("run_at", run_at),
        delay=0.0 if delay is None else validation.check_delay("delay", delay),
        idempotency_key=validation.check_key(idempotency_key),
        unique_key=validation.check_key(unique_key, "unique_key"),
        concurrency_key=check_concurrency_key(concurrency_key, task.limits if task else None),
        columns=check_columns(columns) if check_columns is not None else (),
        after=upstream,
        after_failure=rule,
    )


#: Per registry, the kinds already named by `_say_unregistered` (once per kind).
_NAMED: weakref.WeakKeyDictionary[Registry, set[str]] = weakref.WeakKeyDictionary()


def _say_unregistered(registry: Registry, kind: str, queue: object, max_attempts: object) -> None:
    """Warn, once per kind, that a job of an unregistered kind takes the defaults.

    The task's ``queue`` and ``max_attempts`` are known only where its module was
    imported: a web process that never imports it would write the job with the
    defaults, which a worker serving the task's queue never claims. Only reached when
    the kind has no task here; a registered kind costs nothing more.
    """
    named = _NAMED.setdefault(registry, set())
    if kind in named:
        return
    named.add(kind)
    took = []
    if queue is None:
        took.append(f"queue {DEFAULT_QUEUE!r}")
    if max_attempts is None:
        took.append(f"max_attempts {DEFAULT_MAX_ATTEMPTS}")
    log.warning(
        "enqueue of kind %r, which has no task registered in this process: the job takes "
        "%s, not its task's; import the module that defines its task here (or pass "
        "queue= and max_attempts=) so that the task's options apply (docs/enqueue.md)",
        kind,
        " and ".join(took),
    )


def _check_after_failure(value: object, upstream: tuple[int, ...]) -> str:
    """``after_failure``: ``"cancel"`` (the default) or ``"run"``; only beside ``after=``."""
    if value is None:
        return "cancel"
    if value not in AFTER_FAILURE:
        raise ValidationError(
            "after_failure", value, f"must be one of {', '.join(map(repr, AFTER_FAILURE))}"
        )
    if not upstream and value != "cancel":
        raise ValidationError("after_failure", value, "needs after= (the jobs to wait for)")
    return str(value)


def prepare_many(
    registry: Registry,
    max_payload_bytes: int,
    items: object,
    check_columns: ColumnsCheck | None = None,
    check_after: AfterCheck | None = None,
) -> list[JobSpec]:
    """Validate `items`: ``(kind, payload)`` pairs or dicts of `prepare`'s keywords.

    A pair's job differs from the others of its kind by its payload alone: its kind
    is checked, and its task's queue and max_attempts found, once per kind and call
    (`_Pairs`); each payload is checked as `prepare` checks it.
    """
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise ValidationError("items", items, "must be a list of (kind, payload) pairs or of dicts")
    specs: list[JobSpec] = []
    append = specs.append
    pairs = _Pairs(registry, max_payload_bytes, check_columns)
    for index, item in enumerate(items):
        try:
            if type(item) is tuple and len(item) == 2 and type(item[0]) is str:
                append(pairs.spec(item[0], item[1]))
            else:
                append(_prepare_item(registry, max_payload_bytes, item, check_columns, check_after))
        except ValidationError as exc:
            exc.args = (f"items[{index}]: {exc.args[0]}",)
            raise
    return specs


class _Pairs:
    """`prepare` for ``(kind, payload)`` pairs, with what depends on the kind alone kept."""

    def __init__(
        self, registry: Registry, max_payload_bytes: int, check_columns: ColumnsCheck | None
    ) -> None:
        self.registry = registry
        self.max_payload_bytes = max_payload_bytes
        self.check_columns = check_columns
        #: Per kind: the spec of its job with an empty payload (every other field is
        #: the same for each pair of that kind).
        self.kinds: dict[str, JobSpec] = {}

    def spec(self, kind: str, payload: Any) -> JobSpec:
        """The spec `prepare` makes of ``(kind, payload)``; raises as `prepare` does."""
        known = self.kinds.get(kind)
        if known is None:
            # The kind's checks come first, as in `prepare`: a bad kind is named
            # before its payload. Not kept when it raises.
            known = prepare(
                self.registry, self.max_payload_bytes, kind, check_columns=self.check_columns
            )
            self.kinds[kind] = known
        # Positional arguments: a batch builds a thousand of these, and keywords
        # double what each costs. Every field but the payload is the kind's.
        return JobSpec(
            known.kind,
            known.queue,
            known.payload
            if payload is None
            else validation.dump_payload(payload, self.max_payload_bytes),
            known.priority,
            known.max_attempts,
            None,  # run_at
            0.0,  # delay
            None,  # idempotency_key
            None,  # unique_key
            known.concurrency_key,
            known.columns,
        )


def _prepare_item(
    registry: Registry,
    max_payload_bytes: int,
    item: object,
    check_columns: ColumnsCheck | None,
    check_after: AfterCheck | None = None,
) -> JobSpec:
    if isinstance(item, Mapping):
        unknown = set(item) - _OPTIONS
        if unknown:
            raise ValidationError("item", item, f"unknown keys {sorted(map(str, unknown))}")
        if "kind" not in item:
            raise ValidationError("item", item, "has no 'kind'")
        options = dict(item)
        kind = options.pop("kind")
        return prepare(
            registry,
            max_payload_bytes,
            kind,
            **options,
            check_columns=check_columns,
            check_after=check_after,
        )
    if isinstance(item, Sequence) and not isinstance(item, (str, bytes)) and len(item) == 2:
        return prepare(registry, max_payload_bytes, item[0], item[1], check_columns=check_columns)
    raise ValidationError("item", item, "must be a (kind, payload) pair or a dict")
