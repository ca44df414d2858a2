"""`Step`: its checks at construction, and its tries in a context made outside a worker."""

from __future__ import annotations

import asyncio
import functools
import threading
from datetime import timedelta

import pytest

from sa_jobqueue import Retry, Step, ValidationError
from sa_jobqueue.context import JobContext


def context() -> JobContext:
    return JobContext(id=1, kind="k", queue="default", payload={}, attempt=1, idempotency_key="x")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": ""}, "step name='': must not be empty"),
        ({"name": 7}, "step name=7: must be a str, not int"),
        ({"name": "a b"}, "step name='a b': may only hold"),
        ({"name": "a", "timeout": 0}, "timeout=0: must be a positive number of seconds"),
        ({"name": "a", "timeout": -1.5}, "timeout=-1.5: must be a positive number"),
        ({"name": "a", "timeout": "10"}, "timeout='10': must be seconds or a timedelta, not str"),
        ({"name": "a", "timeout": True}, "timeout=True: must be seconds or a timedelta"),
        ({"name": "a", "retries": -1}, "retries=-1: must be 0 or more"),
        ({"name": "a", "retries": 1.5}, "retries=1.5: must be an int, not float"),
        ({"name": "a", "backoff": 3}, "backoff=3: must be a callable"),
    ],
)
def test_bad_step_options_fail_at_step_in_one_line(options, message):
    with pytest.raises(ValidationError) as raised:
        Step(**options)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def refund(charge: object) -> None:
    """A compensation a worker can import: a function at the top of its module."""


class _Payments:
    def refund(self, charge: object) -> None: ...


def _nested() -> object:
    def refund_inside(charge: object) -> None: ...

    return refund_inside


@pytest.mark.parametrize(
    ("compensate", "message"),
    [
        (lambda charge: None, "is a lambda or nested function"),
        (_nested(), "is a lambda or nested function"),
        (_Payments().refund, "must be a function defined at the top level"),
        (functools.partial(refund), "not partial"),
        ("tests.unit.test_step_options:refund", "not str"),
    ],
)
def test_a_compensation_a_worker_could_not_import_fails_at_step(compensate, message):
    with pytest.raises(ValidationError, match="compensate=") as raised:
        Step("charge", compensate=compensate)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_compensation_of_main_fails_at_step():
    def refund(charge: object) -> None: ...

    refund.__module__, refund.__qualname__ = "__main__", "refund"
    with pytest.raises(ValidationError, match="another worker process cannot import"):
        Step("charge", compensate=refund)


def test_a_top_level_compensation_is_kept_with_its_import_path():
    step = Step("charge", compensate=refund)
    assert step.compensate is refund
    assert step.compensate_path == "tests.unit.test_step_options:refund"
    assert Step("charge").compensate_path is None


def test_a_timedelta_timeout_is_stored_in_seconds():
    assert Step("a", timeout=timedelta(milliseconds=1500)).timeout == 1.5


def test_retries_call_the_function_again_with_the_backoff_between_tries():
    calls, waits = [], []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError(f"down {len(calls)}")
        return "up"

    def backoff(n: int) -> float:
        waits.append(n)
        return 0.0

    assert context().step(Step("call", retries=2, backoff=backoff), flaky) == "up"
    assert (len(calls), waits) == (3, [1, 2])


def test_the_last_error_fails_the_step_when_its_retries_run_out():
    def broken() -> None:
        raise ConnectionError("down")

    with pytest.raises(ConnectionError, match="down"):
        context().step(Step("call", retries=1, backoff=lambda n: 0), broken)


def test_retry_and_discard_end_the_step_at_once():
    calls = []

    def rescheduled() -> None:
        calls.append(1)
        raise Retry(delay=5)

    with pytest.raises(Retry):
        context().step(Step("call", retries=3, backoff=lambda n: 0), rescheduled)
    assert calls == [1]


def test_a_bad_backoff_value_fails_with_one_line():
    def broken() -> None:
        raise ConnectionError("down")

    with pytest.raises(ValidationError, match=r"backoff\(1\)=-1: must return a finite number"):
        context().step(Step("call", retries=1, backoff=lambda n: -1), broken)


def test_a_sync_call_past_its_timeout_is_a_failed_try_and_its_late_result_is_dropped():
    release = threading.Event()
    calls = []

    def slow() -> str:
        calls.append(1)
        if len(calls) == 1:
            release.wait(10)
            return "late"
        return "second"

    assert context().step(Step("call", timeout=0.05, retries=1, backoff=lambda n: 0), slow) == (
        "second"
    )
    release.set()


def test_an_async_call_past_its_timeout_is_cancelled_and_times_the_step_out():
    cancelled = []

    async def slow() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(1)
            raise

    async def run() -> None:
        await context().astep(Step("call", timeout=0.05), slow)

    with pytest.raises(TimeoutError, match=r"timed out after 0\.05s"):
        asyncio.run(run())
    assert cancelled == [1]


def test_a_cancelled_attempt_stops_retrying():
    stop = threading.Event()
    ctx = JobContext(
        id=1, kind="k", queue="q", payload={}, attempt=1, idempotency_key="x", _stop=stop
    )
    calls = []

    def broken() -> None:
        calls.append(1)
        stop.set()
        raise ConnectionError("down")

    with pytest.raises(ConnectionError):
        ctx.step(Step("call", retries=5, backoff=lambda n: 30), broken)
    assert calls == [1]
