"""`replay`: a job's recorded steps against today's handler code, in a test.

A deploy changes handlers under jobs that are parked or half done; each resumes by
running its handler from the top, its recorded steps returning their results. `replay`
runs today's handler over one job's record (an export, ``sa-jobqueue jobs export ID``,
or the job's rows read through a session) and fails, naming each recorded step that
the new code would run again, skip, or reach in another order. No step function, sleep
or signal wait runs: the replay stops where the job would go on with work it never
recorded. See docs/durable.md ("Changing code under running jobs") and docs/testing.md.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session

from sa_jobqueue.context import JobContext
from sa_jobqueue.core.patches import PATCH_KIND
from sa_jobqueue.core.steps import AttemptSteps
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.jobqueue import JobQueue
from sa_jobqueue.ops.job_export import EXPORT_FORMAT, job_export
from sa_jobqueue.testing.running import _prepare

__all__ = ["Replayed", "replay"]

#: Rows no run reaches by name (a `Step`'s failed tries, compensation): history only.
_HISTORY = frozenset({"try", "compensate", "compensated", "compensating", "compensation"})


@dataclass(frozen=True)
class Replayed:
    """What `replay` saw of a job whose record today's code replays cleanly.

    Attributes:
        job_id: the job's id.
        kind: its task's name.
        reached: the names of the durable calls the handler made (steps, sleeps,
            signal waits, ``ctx.patched`` markers), in order.
        stopped_at: the first call the job never recorded (where it would go on with
            new work), or an open signal wait it is parked on; None when the handler
            returned or raised first.
        error: what the handler raised after its recorded steps, or None.
        patches: each ``ctx.patched`` marker's answer in this replay.
    """

    job_id: int
    kind: str
    reached: list[str]
    stopped_at: str | None
    error: BaseException | None
    patches: dict[str, bool]


class _Stop(BaseException):
    """Unwinds the handler where the job would go on with work it never recorded."""


class _ReplaySteps(AttemptSteps):
    """An attempt whose steps come from the record; stops at the first unrecorded call."""

    stopped_at: str | None = None

    def claim_name(self, name: object, what: str) -> str:
        checked = super().claim_name(name, what)
        found = (self.recorded or {}).get(checked)
        if what != PATCH_KIND and (found is None or found[0] == "wait"):
            self.stopped_at = checked
            raise _Stop(checked)
        return checked


def _load(jobs: JobQueue[Any], source: Any, job_id: int | None) -> dict[str, Any]:
    """The export `source` stands for: a mapping, a file's path, or a session."""
    if isinstance(source, (Session, Connection)):
        if job_id is None:
            raise ConfigurationError("replay from a session needs the job_id")
        if isinstance(source, Connection):
            with Session(bind=source) as session:
                found = job_export(session, jobs.model, job_id)
        else:
            found = job_export(source, jobs.model, job_id)
        if found is None:
            raise ConfigurationError(f"replay: no job {job_id} in {jobs.table_name!r}")
        return found
    if isinstance(source, (str, os.PathLike)):
        with open(source, encoding="utf-8") as file:
            source = json.load(file)
    if not isinstance(source, Mapping) or source.get("format") != EXPORT_FORMAT:
        raise ConfigurationError(
            "replay needs an export of `sa-jobqueue jobs export ID` (format "
            f"{EXPORT_FORMAT!r}: a dict or its file's path) or a session, not {source!r:.80}"
        )
    exported = int(source["job"]["id"])
    if job_id is not None and job_id != exported:
        raise ConfigurationError(f"replay: the export is of job {exported}, not {job_id}")
    return dict(source)


def _ranks(steps: list[dict[str, Any]]) -> dict[str, int]:
    """Each recorded name's place: rows recorded at the same instant share one."""
    ranks: dict[str, int] = {}
    times: dict[Any, int] = {}
    for step in steps:
        if step["kind"] not in _HISTORY:
            ranks[step["name"]] = times.setdefault(step["recorded_at"], len(times))
    return ranks


def replay(
    jobs: JobQueue[Any],
    source: Mapping[str, Any] | str | os.PathLike[str] | Session | Connection,
    job_id: int | None = None,
    *,
    session: Session | None = None,
    engine: Engine | None = None,
) -> Replayed:
    """Replay a job's recorded steps against today's handler of its kind; fail on a drift.

    The handler runs with a `JobContext` whose recorded steps are the job's: each
    ``ctx.step`` (sleep, signal wait) it reaches returns what the job recorded, and
    ``ctx.patched`` answers as a worker would for this job. The replay stops at the
    first call the job never recorded, or at an open signal wait: no step function
    runs. Code outside steps runs, as on every resume.

    Args:
        jobs: the application's queue, whose handler (today's code) runs.
        source: the export of ``sa-jobqueue jobs export ID`` (the decoded dict, or its
            file's path), or a session (or connection) to read job `job_id` from.
        job_id: the job (required with a session; with an export, checked against it).
        session: for a transactional handler's ``ctx.session``: the test's session; the
            handler's writes are rolled back (a SAVEPOINT) when the replay ends.
        engine: ``ctx.engine``, for a handler that opens sessions of its own outside
            its steps (without it, ``ctx.engine`` raises there).

    Returns:
        A `Replayed` (what was reached, where it stopped), when nothing drifted.

    Raises:
        AssertionError: naming each recorded step the new code would run again (it
            reaches a call the job never recorded while recorded steps lie ahead, as a
            renamed step does), skip (recorded, never reached), or reach in another
            order than recorded; and what the handler raised before its end, if it did.
        ConfigurationError: a bad `source`, no task registered as the job's kind, or a
            transactional one without `session`.
    """
    export = _load(jobs, source, job_id)
    job, steps = export["job"], list(export["steps"])
    recorded = {step["name"]: (step["kind"], step["result"]) for step in steps}
    task, context = _prepare(
        "replay",
        jobs,
        job["kind"],
        job["payload"],
        attempt=max(int(job["attempts"]), 0) + 1,
        job_id=int(job["id"]),
        queue=job["queue"],
        max_attempts=int(job["max_attempts"]),
        idempotency_key=job.get("idempotency_key"),
        cancelled=False,
        engine=engine,
    )
    if task.transactional and session is None:
        raise ConfigurationError(
            f"task {task.kind!r} is transactional: pass session= (the test's session), "
            "whose connection its ctx.session uses"
        )
    state = _ReplaySteps(recorded=dict(recorded))
    error = _run(task, context, state, session)
    return _judge(job, steps, state, error)


def _run(task: Any, context: Any, state: _ReplaySteps, session: Session | None) -> Any:
    """Run the handler over `state`; what it raised (None: returned or stopped)."""

    def call(handler_session: Any) -> None:
        ctx: JobContext = context(handler_session)
        ctx._durable = state
        result = task.handler(ctx)
        if task.is_async:
            asyncio.run(result)

    try:
        if session is not None and task.transactional:
            connection = session.connection()
            with Session(bind=connection, join_transaction_mode="create_savepoint") as handler:
                savepoint = handler.begin()
                try:
                    call(handler)
                finally:
                    savepoint.rollback()
        else:
            call(None)
    except _Stop:
        return None
    except Exception as raised:  # noqa: BLE001 - part of the replay's verdict
        return raised
    return None


def _judge(
    job: Mapping[str, Any], steps: list[dict[str, Any]], state: _ReplaySteps, error: Any
) -> Replayed:
    """The `Replayed`, or the AssertionError naming each drift."""
    ranks = _ranks(steps)
    reached = list(state.used)
    problems: list[str] = []
    ahead = [name for name in ranks if name not in state.used]
    new = state.stopped_at if state.stopped_at not in ranks else None
    if new is not None and ahead:
        problems.append(
            f"would run {state.used[new]} {new!r}, which the job never recorded, before "
            f"recorded {_names(ahead)}: a renamed step runs again under its new name "
            "(keep the old name, or put new code behind ctx.patched)"
        )
    elif ahead:
        problems.append(
            f"never reaches recorded {_names(ahead)}: the new code skips them (renamed or "
            "removed? keep them, or put the change behind ctx.patched)"
        )
    seen = [name for name in reached if name in ranks]
    for i, later in enumerate(seen):
        for earlier in seen[i + 1 :]:
            if ranks[earlier] < ranks[later]:
                problems.append(
                    f"reaches {later!r} before {earlier!r}, which the job recorded first"
                )
    label = f"job {job['id']} ({job['kind']!r})"
    if problems:
        if error is not None and ahead:
            problems.append(f"the handler raised {type(error).__name__}: {error}")
        lines = "\n".join(f"  - {problem}" for problem in problems)
        raise AssertionError(
            f"{label}: today's handler drifts from its recorded steps:\n{lines}"
        ) from error
    patches = {n: bool(v[1]) for n, v in (state.recorded or {}).items() if v[0] == PATCH_KIND}
    patches = {n: v for n, v in patches.items() if n in state.used}
    return Replayed(int(job["id"]), str(job["kind"]), reached, state.stopped_at, error, patches)


def _names(names: list[str]) -> str:
    return ", ".join(repr(name) for name in names)
