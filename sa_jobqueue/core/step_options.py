"""`Step`: a durable step's options (timeout, retries, backoff, compensate), and its tries.

``ctx.step(Step("charge", timeout=10, retries=2), charge, order_id)`` runs ``charge``
up to three times in one attempt, each call bounded by 10 seconds, and records the first
result. Each failed try is recorded as a row of its own (kind ``try``) beside the job's
steps, so ``sa-jobqueue jobs show`` lists it. See docs/durable.md ("Step options").
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sa_jobqueue.core import compensation
from sa_jobqueue.core.validation import check_name
from sa_jobqueue.errors import ValidationError
from sa_jobqueue.retry import BackoffPolicy, exponential

__all__ = ["Step", "StepTries", "never_retried", "run_with_timeout"]

#: Exceptions a step's retries never retry; `sa_jobqueue.handler_exceptions` adds
#: `Retry` and `Discard` when it is imported (a handler raising one has imported it).
_NEVER_RETRIED: list[type[BaseException]] = []


def never_retried(*types: type[BaseException]) -> None:
    """Make `types` end a step's tries at once, as they end an attempt (`Retry`, `Discard`)."""
    _NEVER_RETRIED.extend(t for t in types if t not in _NEVER_RETRIED)


#: The longest error text a try's row keeps, in characters.
_MAX_ERROR = 2000

#: How often a backoff between tries looks at ``ctx.cancelled``, in seconds.
_CANCEL_POLL = 0.1


@dataclass(frozen=True, init=False)
class Step:
    """A durable step's name and options, given to ``ctx.step`` in place of the name.

    Args:
        name: the step's name, unique among the job's steps, sleeps and waits.
        timeout: seconds (or a ``timedelta``) one call of the step's function may run;
            a call that runs longer counts as a failed try (`TimeoutError`). None: no
            bound. An ``async`` function is cancelled; a plain function cannot be
            stopped in Python: it runs in a thread of its own, which the step stops
            waiting for; whatever it returns or raises later is dropped, never recorded
            (it must not use ``ctx.session``, which the handler goes on using).
        retries: how many more times the function is called, in the same attempt,
            after a try that raised (or timed out); 0 calls it once. When every try
            failed, the last try's exception fails the attempt (the job's own retries
            and backoff then apply as for any handler error).
        backoff: seconds to wait after failed try number ``n`` (1 for the first), as
            ``backoff(n)``; None: the library's default (`sa_jobqueue.retry.exponential`,
            2 s doubling). The wait ends early, with the last error, once
            ``ctx.cancelled`` is true.
        compensate: a function called with the step's recorded result if the job
            ends failed for good (attempts used up, `Discard`, a cancel, its
            deadline): each recorded step's, once, newest first, by whichever worker
            claims the job then (docs/durable.md, "Compensation"). It must be defined
            at the top level of an importable module (not a lambda, a nested function
            or a method): its import path is recorded with the job. None: none.

    `Retry`, `Discard` and exceptions that are not `Exception` subclasses are never
    retried: they end the attempt at once, as outside a step. Each failed try is
    recorded as a row ``<name>#<attempt>.<try>`` of kind ``try`` with its error (shown
    by ``sa-jobqueue jobs show``; in transactional mode written in the handler's
    transaction, so an attempt that fails keeps only its error in the history).

    Raises:
        ValidationError: a bad name, a timeout that is not a positive number, retries
            that are not an integer of at least 0, a backoff that is not callable,
            a compensate that is not an importable top-level function.

    Example::

        card = ctx.step(Step("charge", timeout=10, retries=2, backoff=lambda n: 1.0),
                        payments.charge, order_id)
    """

    name: str
    timeout: float | None
    retries: int
    backoff: BackoffPolicy | None
    compensate: Callable[[Any], Any] | None
    #: The compensation's import path (``module:qualname``), recorded with the step.
    compensate_path: str | None

    def __init__(
        self,
        name: str,
        timeout: timedelta | float | None = None,
        retries: int = 0,
        backoff: BackoffPolicy | None = None,
        compensate: Callable[[Any], Any] | None = None,
    ) -> None:
        check_name("step name", name)
        seconds = None if timeout is None else _check_timeout(timeout)
        if isinstance(retries, bool) or not isinstance(retries, int):
            raise ValidationError(
                "retries", retries, f"must be an int, not {type(retries).__name__}"
            )
        if retries < 0:
            raise ValidationError("retries", retries, "must be 0 or more")
        if backoff is not None and not callable(backoff):
            raise ValidationError(
                "backoff", backoff, "must be a callable of the try number returning seconds"
            )
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "timeout", seconds)
        object.__setattr__(self, "retries", retries)
        object.__setattr__(self, "backoff", backoff)
        object.__setattr__(self, "compensate", compensate)
        path = None if compensate is None else compensation.callable_path(compensate)
        object.__setattr__(self, "compensate_path", path)

    def delay(self, failed_try: int) -> float:
        """Seconds to wait after failed try `failed_try`, checked.

        Raises:
            ValidationError: `backoff` returned something else than seconds (>= 0).
        """
        policy = self.backoff or exponential
        seconds = policy(failed_try)
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, (int, float))
            or not math.isfinite(seconds)
            or seconds < 0
        ):
            raise ValidationError(
                f"step {self.name!r} backoff({failed_try})",
                seconds,
                "must return a finite number of seconds, 0 or more",
            )
        return float(seconds)


def _check_timeout(value: object) -> float:
    seconds: object = value
    total = getattr(value, "total_seconds", None)
    if callable(total):
        seconds = total()
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise ValidationError(
            "timeout", value, f"must be seconds or a timedelta, not {type(value).__name__}"
        )
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValidationError("timeout", value, "must be a positive number of seconds")
    return float(seconds)


def run_with_timeout(fn: Callable[..., Any], timeout: float, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a daemon thread of its own, waited for `timeout` seconds.

    Raises `TimeoutError` when it has not returned by then; the call goes on in its
    thread and what it returns or raises later is dropped.
    """
    done = threading.Event()
    outcome: list[Any] = []
    context = contextvars.copy_context()

    def call() -> None:
        try:
            outcome.append((True, context.run(fn, *args, **kwargs)))
        except BaseException as exc:  # noqa: BLE001 - handed back to the waiting caller
            outcome.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=call, name="sa-jobqueue-step", daemon=True).start()
    if not done.wait(timeout):
        raise TimeoutError(f"timed out after {timeout:g}s")
    ok, value = outcome[0]
    if ok:
        return value
    raise value


async def _arun_with_timeout(
    fn: Callable[..., Any], timeout: float | None, args: Any, kwargs: Any
) -> Any:
    if timeout is None:
        value = fn(*args, **kwargs)
        return await value if inspect.isawaitable(value) else value
    if asyncio.iscoroutinefunction(fn):
        try:
            return await asyncio.wait_for(fn(*args, **kwargs), timeout)
        except TimeoutError:
            raise TimeoutError(f"timed out after {timeout:g}s") from None
    # A plain function under a timeout: off the loop, so the loop can stop waiting.
    future = asyncio.get_running_loop().run_in_executor(
        None, lambda: run_with_timeout(fn, timeout, *args, **kwargs)
    )
    value = await future
    return await value if inspect.isawaitable(value) else value


class StepTries:
    """The tries of one step in one attempt, as its `Step` options say.

    Args:
        step: the options.
        ctx: the attempt's `JobContext` (its ``attempt`` names the try rows; its
            ``cancelled`` ends the backoff).
    """

    def __init__(self, step: Step, ctx: Any) -> None:
        self.step = step
        self.ctx = ctx
        self.attempt: int = ctx.attempt
        self.final = tuple(_NEVER_RETRIED)

    def stop(self) -> bool:
        """Whether the attempt was told to stop (``ctx.cancelled``): no more tries."""
        return bool(self.ctx.cancelled)

    def row_name(self, number: int) -> str:
        """The name of failed try `number`'s row (``#`` is in no step name: no clash)."""
        return f"{self.step.name}#{self.attempt}.{number}"

    def error_text(self, number: int, error: BaseException) -> str:
        """What try `number`'s row holds: a JSON string saying what `error` was."""
        text = f"try {number} of {self.step.retries + 1}: {type(error).__name__}: {error}"
        return json.dumps(text[:_MAX_ERROR])

    def _give_up(self, number: int, error: Exception) -> bool:
        return isinstance(error, self.final) or number > self.step.retries or self.stop()

    def run(self, fn: Callable[..., Any], args: Any, kwargs: Any, store: Any) -> Any:
        """Call `fn` until a try returns; record each failed one; re-raise the last error.

        `store`: the context's `StepStore`, which writes each failed try's row.
        """
        path = self.step.compensate_path
        if path is not None:
            compensation.register(self.ctx, store, self.step.name, path)
        timeout = self.step.timeout
        number = 0
        while True:
            number += 1
            try:
                if timeout is None:
                    return fn(*args, **kwargs)
                return run_with_timeout(fn, timeout, *args, **kwargs)
            except Exception as error:
                if isinstance(error, self.final):
                    raise
                row, text = self.row_name(number), self.error_text(number, error)
                store.record(self.ctx, row, text, kind="try")
                if self._give_up(number, error):
                    raise
                self._pause(self.step.delay(number))
                if self.stop():
                    raise

    async def arun(self, fn: Callable[..., Any], args: Any, kwargs: Any, store: Any) -> Any:
        """`run` for an ``async def`` handler."""
        path = self.step.compensate_path
        if path is not None:
            await compensation.aregister(self.ctx, store, self.step.name, path)
        number = 0
        while True:
            number += 1
            try:
                return await _arun_with_timeout(fn, self.step.timeout, args, kwargs)
            except Exception as error:
                if isinstance(error, self.final):
                    raise
                row, text = self.row_name(number), self.error_text(number, error)
                await store.arecord(self.ctx, row, text, kind="try")
                if self._give_up(number, error):
                    raise
                end = time.monotonic() + self.step.delay(number)
                while not self.stop() and (left := end - time.monotonic()) > 0:
                    await asyncio.sleep(min(left, _CANCEL_POLL))
                if self.stop():
                    raise

    def _pause(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.stop() and (left := end - time.monotonic()) > 0:
            time.sleep(min(left, _CANCEL_POLL))
