"""``ctx.patched``: the marker that tells a job started under older code from a new one.

A handler changed under running jobs puts new code behind ``if ctx.patched(name):``.
The answer is decided once per job and recorded like a step (a row of kind ``patch``,
result ``true`` or ``false``), so a job's answer never changes within its life:

- recorded already: the recorded answer;
- else **False** when the job has recorded steps (steps, sleeps, signal waits, other
  markers) that this run has not reached yet: the job got past this point under code
  without the marker, so it keeps the old path;
- else **True**: the run reaches the marker fresh (a new job, or a resumed job whose
  every recorded step lies before the marker), so it takes the new path.

The failed tries of a `Step` (rows of kind ``try``) are history, never reached by name:
they do not count. See docs/durable.md ("Changing code under running jobs").
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.orm import Session

from sa_jobqueue.core.steps import AttemptSteps
from sa_jobqueue.core.validation import check_name
from sa_jobqueue.errors import ValidationError

__all__ = ["PATCH_KIND", "apatched", "fresh", "patched"]

#: The steps table's kind of a patch marker's row (result: ``true`` or ``false``).
PATCH_KIND = "patch"

#: Kinds of recorded rows that no run reaches by name (history only).
_HISTORY = frozenset({"try", "compensate", "compensated", "compensating", "compensation"})


def fresh(state: AttemptSteps) -> bool:
    """Whether a marker not recorded for the job is reached fresh: no recorded step is ahead.

    A recorded step is ahead when this run has not reached (used) its name yet.
    """
    recorded = state.recorded or {}
    return all(n in state.used for n, (kind, _) in recorded.items() if kind not in _HISTORY)


def _again(state: AttemptSteps, name: object) -> tuple[str, bool | None]:
    """`name` checked, and this run's answer if it asked already (a marker may be asked twice)."""
    checked = check_name("patch name", name)
    if state.used.get(checked) == PATCH_KIND and state.recorded is not None:
        return checked, bool(state.recorded[checked][1])
    return state.claim_name(checked, PATCH_KIND), None


def _answer(state: AttemptSteps, name: str, found: tuple[str, Any] | None) -> bool | None:
    """The recorded answer of marker `name`, or None when it has none yet."""
    if found is None:
        return None
    if found[0] != PATCH_KIND:
        raise ValidationError(
            "patch name",
            name,
            f"is recorded for this job as a {found[0]}: a marker needs a name no step, "
            "sleep or signal wait of the job uses",
        )
    return bool(found[1])


def _check_sync(ctx: Any) -> None:
    session = ctx._session
    if session is not None and not isinstance(session, Session):  # an AsyncSession
        raise TypeError("ctx.patched in an async transactional handler: use `await ctx.apatched`")


def patched(ctx: Any, name: object) -> bool:
    """``ctx.patched(name)`` (see the module's docstring for the answer)."""
    store, state = ctx._attempt_steps()
    name, again = _again(state, name)
    if again is not None:
        return again
    _check_sync(ctx)
    answer = _answer(state, name, state.find(store, ctx, name))
    if answer is None:
        answer = fresh(state)
        store.record(ctx, name, json.dumps(answer), kind=PATCH_KIND)
        if state.recorded is not None:  # always: read by `find`
            state.recorded[name] = (PATCH_KIND, answer)
    return answer


async def apatched(ctx: Any, name: object) -> bool:
    """``await ctx.apatched(name)``: `patched` for an ``async def`` handler."""
    store, state = ctx._attempt_steps()
    name, again = _again(state, name)
    if again is not None:
        return again
    answer = _answer(state, name, await state.afind(store, ctx, name))
    if answer is None:
        answer = fresh(state)
        await store.arecord(ctx, name, json.dumps(answer), kind=PATCH_KIND)
        if state.recorded is not None:  # always: read by `afind`
            state.recorded[name] = (PATCH_KIND, answer)
    return answer
