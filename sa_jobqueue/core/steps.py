"""What ``ctx.step``, ``ctx.sleep``, ``ctx.wait_for_signal`` and ``ctx.progress`` share.

The checks of their arguments, the per-attempt state (`AttemptSteps`: names used in this
run, the steps recorded by earlier attempts, the throttled progress), the two control-flow
exceptions that unwind a handler (`Parked`, `StepLeaseLost`), the `StepStore` protocol the
worker implements (`sa_jobqueue.worker.run.step_store`), and `MemorySteps`, the store of a
context made outside a worker (``testing.perform``). See docs/durable.md.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from sa_jobqueue.core.validation import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    check_delay,
    check_name,
    dump_payload,
)
from sa_jobqueue.errors import ValidationError

__all__ = [
    "MAX_PROGRESS_BYTES",
    "PROGRESS_INTERVAL",
    "AttemptSteps",
    "MemorySteps",
    "ParkSwallowed",
    "Parked",
    "StepLeaseLost",
    "StepStore",
    "check_progress",
    "check_timeout",
    "dump_step_result",
]

#: ``ctx.progress`` writes at most once per this many seconds per attempt; the last
#: value is always written when the attempt ends.
PROGRESS_INTERVAL = 0.5

#: The largest progress object, in bytes of JSON text.
MAX_PROGRESS_BYTES = 2048


class Parked(BaseException):
    """Unwinds a handler whose job was just parked (a ``ctx.sleep``, a signal wait).

    A `BaseException`, so a handler's ``except Exception`` does not swallow it; the
    worker turns it into its ``parked`` outcome (the row is ``pending`` already).
    `sleeping`: parked by a sleep (else by a signal wait).
    """

    def __init__(self, message: str, *, sleeping: bool = False) -> None:
        super().__init__(message)
        self.sleeping = sleeping


class ParkSwallowed(Exception):  # noqa: N818 - named after what the handler did
    """A handler went on after its job was parked: it caught the `Parked` that unwinds it.

    ``except BaseException`` (or a bare ``except``) around ``ctx.sleep`` or
    ``ctx.wait_for_signal`` catches the park; the handler would then run on at once
    and again when the job wakes. The attempt fails with this error instead, at the
    handler's next durable call or its return (transactional mode: nothing of it
    commits, the park included).
    """


class StepLeaseLost(BaseException):
    """Unwinds a handler whose fenced step write matched no row: its lease was lost.

    The attempt records nothing more; the job's current attempt (another worker's,
    or a later one) runs the step.
    """


def dump_step_result(name: str, value: Any, max_bytes: int) -> str | None:
    """`value` as JSON text for step `name`'s record (None stays NULL); checked like results.

    Raises:
        PayloadError: not storable as JSON; the path starts ``step['name']``.
    """
    if value is None:
        return None
    return dump_payload(value, max_bytes, name=f"step[{name!r}]")


def check_progress(value: object) -> str:
    """`value` (a number 0-1, or a small JSON object) as JSON text, or a `ValidationError`."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
        if not math.isfinite(number) or not 0.0 <= number <= 1.0:
            raise ValidationError("progress", value, "a number must be between 0 and 1")
        return json.dumps(number)
    if isinstance(value, Mapping):
        return dump_payload(dict(value), MAX_PROGRESS_BYTES, name="progress")
    raise ValidationError(
        "progress",
        value,
        f"must be a number between 0 and 1 or a JSON object, not {type(value).__name__}",
    )


def check_timeout(value: object) -> float | None:
    """A signal wait's timeout (a timedelta or seconds, or None: no timeout) in seconds."""
    return None if value is None else check_delay("timeout", value)


@dataclass
class AttemptSteps:
    """One attempt's durable state, made by its first ``ctx.step`` (or sleep, wait, progress).

    Attributes:
        recorded: name -> (kind, result) of what earlier attempts recorded; None until
            read (once, and only for a job that has steps).
        used: the names this run has used so far, in the order it reached them, each
            mapped to what used it (``step``, ``sleep``, ``signal wait``, ``patch``).
        progress: the progress value not written yet (JSON text), if any.
        progress_at: when progress was last written (`time.monotonic`).
        parked: what parked the job in this run (the `Parked` message), if anything.
    """

    recorded: dict[str, tuple[str, Any]] | None = None
    used: dict[str, str] = field(default_factory=dict)
    progress: str | None = None
    progress_at: float = -math.inf
    parked: str | None = None

    def park(self, parked: Parked) -> Parked:
        """Remember that `parked` unwinds this run (to tell if the handler swallows it)."""
        self.parked = str(parked)
        return parked

    def swallowed(self, went_on: str) -> ParkSwallowed | None:
        """The error for a handler that `went_on` after its park, or None if none parked it."""
        if self.parked is None:
            return None
        return ParkSwallowed(
            f"{self.parked}, but the handler went on ({went_on}): it caught the park "
            "(ctx.sleep and ctx.wait_for_signal unwind the handler with a Parked, a "
            "BaseException; `except BaseException` or a bare `except` catches it). "
            "Let it propagate (re-raise it) so the job sleeps or waits instead of "
            "running on now and again when it wakes"
        )

    def check_not_parked(self, went_on: str) -> None:
        """Raise `ParkSwallowed` if this run parked the job already."""
        error = self.swallowed(went_on)
        if error is not None:
            raise error

    def claim_name(self, name: object, what: str) -> str:
        """Check `name` and mark it used in this run; a reused name is an error here."""
        self.check_not_parked(f"it called {what} {name!r} afterwards")
        checked = check_name(f"{what} name", name)
        if checked in self.used:
            raise ValidationError(
                f"{what} name",
                name,
                "is used already in this run of the handler: each step, sleep and "
                "signal wait of a job needs a name of its own",
            )
        self.used[checked] = what
        return checked

    def find(self, store: StepStore, ctx: Any, name: str) -> tuple[str, Any] | None:
        """``(kind, result)`` that an earlier attempt recorded as `name`, or None.

        The job's recorded steps are read once per attempt, on first use, and only for
        a job that has recorded some (``ctx._has_steps``, read from the claim).
        """
        if self.recorded is None:
            self.recorded = store.load(ctx) if ctx._has_steps else {}
        return self.recorded.get(name)

    async def afind(self, store: StepStore, ctx: Any, name: str) -> tuple[str, Any] | None:
        """`find`, awaitable."""
        if self.recorded is None:
            self.recorded = await store.aload(ctx) if ctx._has_steps else {}
        return self.recorded.get(name)

    def progress_due(self, now: float | None = None) -> bool:
        """Whether a progress write is allowed now (the throttle)."""
        return (time.monotonic() if now is None else now) - self.progress_at >= PROGRESS_INTERVAL


class StepStore(Protocol):
    """Where a context's steps are recorded: the worker's fenced writes, or memory.

    `ctx` is the `JobContext`; each method runs where its mode says (lease mode: a
    transaction of its own, committed; transactional mode: the handler's).
    """

    #: The largest step result accepted, in bytes of JSON text (as a handler's result).
    max_bytes: int

    def load(self, ctx: Any) -> dict[str, tuple[str, Any]]:
        """What earlier attempts of `ctx`'s job recorded: name -> (kind, result)."""
        ...

    async def aload(self, ctx: Any) -> dict[str, tuple[str, Any]]:
        """`load`, awaitable."""
        ...

    def record(self, ctx: Any, name: str, result: str | None, *, kind: str = "step") -> None:
        """Record step `name` with `result` (JSON text), fenced; `StepLeaseLost` if lost.

        `kind`: ``step``, ``try`` (a failed try of a `Step` with options: `result`
        says what it raised; never read back as a step's result), or ``patch`` (a
        ``ctx.patched`` marker's answer, `result` ``true`` or ``false``).
        """
        ...

    async def arecord(self, ctx: Any, name: str, result: str | None, *, kind: str = "step") -> None:
        """`record`, awaitable."""
        ...

    def sleep(self, ctx: Any, name: str, seconds: float) -> bool:
        """Park the job for `seconds` (fenced); True if parked (False: sleep over at once).

        Raises `StepLeaseLost` when the lease was lost.
        """
        ...

    async def asleep(self, ctx: Any, name: str, seconds: float) -> bool:
        """`sleep`, awaitable."""
        ...

    def wait(self, ctx: Any, name: str, timeout: float | None) -> tuple[str, Any]:
        """Take signal `name`, or time the wait out, or park the job (fenced).

        Returns ``("signal", payload)``, ``("timeout", None)`` or ``("parked", None)``;
        raises `StepLeaseLost` when the lease was lost.
        """
        ...

    async def await_(self, ctx: Any, name: str, timeout: float | None) -> tuple[str, Any]:
        """`wait`, awaitable."""
        ...

    def spawn(self, ctx: Any, name: str, kind: str, payload: Any, options: dict[str, Any]) -> int:
        """Enqueue a child job and record spawn `name` with its id, in one transaction.

        Fenced like a step: when the lease was lost, `StepLeaseLost` and no child.
        """
        ...

    async def aspawn(
        self, ctx: Any, name: str, kind: str, payload: Any, options: dict[str, Any]
    ) -> int:
        """`spawn`, awaitable."""
        ...

    def join(self, ctx: Any, name: str, job_id: int, timeout: float | None) -> tuple[str, Any]:
        """Read how job `job_id` ended, or time the wait `name` out, or park the job (fenced).

        Returns ``("child", {"status", "result", "error"})``, ``("timeout", None)`` or
        ``("parked", None)``; raises `ValidationError` when no job has that id, and
        `StepLeaseLost` when the lease was lost.
        """
        ...

    async def ajoin(
        self, ctx: Any, name: str, job_id: int, timeout: float | None
    ) -> tuple[str, Any]:
        """`join`, awaitable."""
        ...

    def progress(self, ctx: Any, value: str, *, final: bool = False) -> bool:
        """Write progress `value` (fenced); False when it could not be written now."""
        ...

    async def aprogress(self, ctx: Any, value: str, *, final: bool = False) -> bool:
        """`progress`, awaitable."""
        ...


_NO_DATABASE = (
    "{call} needs a database: run the job through a worker (or testing.drain), "
    "not in a context made without one"
)


class MemorySteps:
    """The `StepStore` of a context made outside a worker (``testing.perform``).

    Nothing is stored: steps run, sleeps return at once, and a signal wait returns
    the payload given for its name in `signals` (a wait for any other name times
    out at once when it has a timeout, and parks otherwise).
    """

    def __init__(
        self, signals: Mapping[str, Any] | None = None, max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    ) -> None:
        self.max_bytes = max_bytes
        self.signals = dict(signals or {})
        #: The last progress value written (decoded), for a test to read.
        self.last_progress: Any = None

    def load(self, ctx: Any) -> dict[str, tuple[str, Any]]:  # noqa: D102 - the protocol's
        return {}

    async def aload(self, ctx: Any) -> dict[str, tuple[str, Any]]:  # noqa: D102
        return {}

    def record(self, ctx: Any, name: str, result: str | None, *, kind: str = "step") -> None:  # noqa: D102
        return None

    async def arecord(self, ctx: Any, name: str, result: str | None, *, kind: str = "step") -> None:  # noqa: D102
        return None

    def sleep(self, ctx: Any, name: str, seconds: float) -> bool:  # noqa: D102
        return False

    async def asleep(self, ctx: Any, name: str, seconds: float) -> bool:  # noqa: D102
        return False

    def wait(self, ctx: Any, name: str, timeout: float | None) -> tuple[str, Any]:  # noqa: D102
        if name in self.signals:
            return "signal", self.signals[name]
        return ("timeout", None) if timeout is not None else ("parked", None)

    async def await_(self, ctx: Any, name: str, timeout: float | None) -> tuple[str, Any]:  # noqa: D102
        return self.wait(ctx, name, timeout)

    def spawn(  # noqa: D102
        self, ctx: Any, name: str, kind: str, payload: Any, options: dict[str, Any]
    ) -> int:
        raise RuntimeError(_NO_DATABASE.format(call="ctx.spawn"))

    async def aspawn(  # noqa: D102
        self, ctx: Any, name: str, kind: str, payload: Any, options: dict[str, Any]
    ) -> int:
        return self.spawn(ctx, name, kind, payload, options)

    def join(self, ctx: Any, name: str, job_id: int, timeout: float | None) -> tuple[str, Any]:  # noqa: D102
        raise RuntimeError(_NO_DATABASE.format(call="ctx.wait_for_job"))

    async def ajoin(  # noqa: D102
        self, ctx: Any, name: str, job_id: int, timeout: float | None
    ) -> tuple[str, Any]:
        return self.join(ctx, name, job_id, timeout)

    def progress(self, ctx: Any, value: str, *, final: bool = False) -> bool:  # noqa: D102
        self.last_progress = json.loads(value)
        return True

    async def aprogress(self, ctx: Any, value: str, *, final: bool = False) -> bool:  # noqa: D102
        return self.progress(ctx, value, final=final)
