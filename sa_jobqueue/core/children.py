"""``ctx.spawn`` and ``ctx.wait_for_job``: child jobs, enqueued once and awaited durably.

A spawn is recorded like a step (a row of kind ``spawn``, its result the child's id) in the
transaction that inserts the child, so a replay returns the same id and never inserts a
second child. A wait is named ``job:<id>``: an open wait (kind ``wait``) parks the parent
like a signal wait, with an edge to the child whose end makes it due again
(docs/workflows.md's release); how the child ended is recorded (kind ``child``: its status,
result and error), or that the wait timed out (kind ``timeout``), so a job's answer never
changes. The worker's side is `sa_jobqueue.worker.run.step_store`. See docs/durable.md
("Child jobs").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sa_jobqueue.core.steps import AttemptSteps, Parked, StepStore, check_timeout
from sa_jobqueue.core.validation import check_job_id
from sa_jobqueue.errors import ChildJobError, ValidationError, WaitTimeoutError

__all__ = [
    "CHILD_KIND",
    "SPAWN_KIND",
    "aspawn",
    "await_for_job",
    "spawn",
    "wait_for_job",
    "wait_name",
]

#: The steps table's kind of a spawn's row (result: the child's id).
SPAWN_KIND = "spawn"
#: The kind of a wait's row once the job waited for has ended (result: how it ended).
CHILD_KIND = "child"
#: What `AttemptSteps.used` says of a name taken by a wait for a job.
_WAIT = "job wait"


def wait_name(job_id: int) -> str:
    """The step name of a wait for job `job_id` (``job:<id>``)."""
    return f"job:{job_id}"


def _spawned(name: str, found: tuple[str, Any] | None) -> int | None:
    """The child id recorded for spawn `name`, or None when it has none yet."""
    if found is None:
        return None
    if found[0] != SPAWN_KIND:
        raise ValidationError(
            "spawn name",
            name,
            f"is recorded for this job as a {found[0]}: a spawn needs a name no step, "
            "sleep, signal wait or marker of the job uses",
        )
    return int(found[1])


def _remember(state: AttemptSteps, name: str, kind: str, value: Any) -> None:
    if state.recorded is not None:  # always: read by `find`
        state.recorded[name] = (kind, value)


def spawn(ctx: Any, name: object, kind: str, payload: Any, options: Mapping[str, Any]) -> int:
    """``ctx.spawn(name, kind, payload, **options)``: the child's id, enqueued once per job."""
    store: StepStore
    store, state = ctx._attempt_steps()
    checked = state.claim_name(name, SPAWN_KIND)
    child = _spawned(checked, state.find(store, ctx, checked))
    if child is None:
        child = store.spawn(ctx, checked, kind, payload, dict(options))
        _remember(state, checked, SPAWN_KIND, child)
    return child


async def aspawn(
    ctx: Any, name: object, kind: str, payload: Any, options: Mapping[str, Any]
) -> int:
    """``await ctx.aspawn(...)``: `spawn` for an ``async def`` handler."""
    store: StepStore
    store, state = ctx._attempt_steps()
    checked = state.claim_name(name, SPAWN_KIND)
    child = _spawned(checked, await state.afind(store, ctx, checked))
    if child is None:
        child = await store.aspawn(ctx, checked, kind, payload, dict(options))
        _remember(state, checked, SPAWN_KIND, child)
    return child


def _check_job_id(ctx: Any, job_id: object) -> int:
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise ValidationError(
            "job_id",
            job_id,
            f"must be a job's id (an int, as ctx.spawn returns), not {type(job_id).__name__}",
        )
    check_job_id(job_id)  # fits the bigint id column
    if job_id == ctx.id:
        raise ValidationError(
            "job_id", job_id, "is this job's own id: a job cannot wait for itself"
        )
    return job_id


def _begin(
    ctx: Any, job_id: object, timeout: object
) -> tuple[AttemptSteps, int, str, float | None]:
    """The checks of a wait, its name taken (a second wait for a job in a run is allowed)."""
    _store, state = ctx._attempt_steps()
    checked = _check_job_id(ctx, job_id)
    seconds = check_timeout(timeout)
    name = wait_name(checked)
    if state.used.get(name) == _WAIT:
        state.check_not_parked(f"it called ctx.wait_for_job({checked}) afterwards")
    else:
        state.claim_name(name, _WAIT)
    return state, checked, name, seconds


def _open(name: str, found: tuple[str, Any] | None) -> bool:
    """Whether the wait must ask the database (nothing recorded, or a wait still open)."""
    if found is None or found[0] == "wait":
        return True
    if found[0] not in (CHILD_KIND, "timeout"):
        raise ValidationError(
            "job_id",
            name,
            f"is recorded for this job as a {found[0]}: the name {name!r} of a wait for "
            "a job must not be used by a step, sleep, signal wait or marker",
        )
    return False


def _answer(job_id: int, found: tuple[str, Any], timeout: float | None) -> Any:
    """The result of the job waited for, or its error, from the recorded answer."""
    kind, value = found
    if kind == "timeout":
        raise WaitTimeoutError(job_id, timeout or 0.0, "not ended")
    if value["status"] != "done":
        raise ChildJobError(job_id, value["status"], value.get("error"))
    return value.get("result")


def wait_for_job(ctx: Any, job_id: object, timeout: object = None) -> Any:
    """``ctx.wait_for_job(job_id, timeout)``: the job's result, parking until it ends."""
    state, checked, name, seconds = _begin(ctx, job_id, timeout)
    store: StepStore = ctx._steps
    found = state.find(store, ctx, name)
    if _open(name, found):
        outcome, value = store.join(ctx, name, checked, seconds)
        if outcome == "parked":
            raise state.park(Parked(f"job {ctx.id} waits for job {checked}"))
        found = (outcome, value)
        _remember(state, name, outcome, value)
    assert found is not None  # noqa: S101 - _open said so
    return _answer(checked, found, seconds)


async def await_for_job(ctx: Any, job_id: object, timeout: object = None) -> Any:
    """``await ctx.await_for_job(job_id, timeout)``: `wait_for_job` for an async handler."""
    state, checked, name, seconds = _begin(ctx, job_id, timeout)
    store: StepStore = ctx._steps
    found = await state.afind(store, ctx, name)
    if _open(name, found):
        outcome, value = await store.ajoin(ctx, name, checked, seconds)
        if outcome == "parked":
            raise state.park(Parked(f"job {ctx.id} waits for job {checked}"))
        found = (outcome, value)
        _remember(state, name, outcome, value)
    assert found is not None  # noqa: S101 - _open said so
    return _answer(checked, found, seconds)
