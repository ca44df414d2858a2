"""Flow-control options: validated where the task is declared, and at enqueue."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.orm import Session

from sa_jobqueue import ConfigurationError, ValidationError
from sa_jobqueue.core.limits import Limits, check_concurrency_key, check_limits
from sa_jobqueue.worker.limited_claimer import MAX_BACKOFF, MIN_BACKOFF, KindBackoff, LimitedClaims
from tests.support.models import new_queue


def _noop(ctx):
    return None


def test_task_keeps_its_limits():
    jobs = new_queue()
    jobs.task("a", max_running=2)(_noop)
    jobs.task("b", max_running_per_key=1)(_noop)
    jobs.task("c", rate_limit=(10, timedelta(seconds=1)))(_noop)
    jobs.task("d", rate_limit=(5, 0.5), max_running=3)(_noop)
    jobs.task("plain")(_noop)
    limits = {task.kind: task.limits for task in jobs.registry}
    assert limits["a"] == Limits(max_running=2)
    assert limits["b"] == Limits(max_running_per_key=1)
    assert limits["c"] == Limits(rate_count=10, rate_window=1.0)
    assert limits["d"] == Limits(max_running=3, rate_count=5, rate_window=0.5)
    assert not limits["plain"].limited
    assert [task.kind for task in jobs.registry.limited()] == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_running": 0}, "max_running=0: must be between 1 and"),
        ({"max_running": -1}, "max_running=-1: must be between 1 and"),
        ({"max_running": 2**31}, "must be between 1 and"),
        ({"max_running": True}, "max_running=True: must be a positive int or None, not bool"),
        ({"max_running": 2.0}, "max_running=2.0: must be a positive int or None, not float"),
        ({"max_running_per_key": 0}, "max_running_per_key=0: must be between 1"),
        ({"max_running_per_key": "1"}, "max_running_per_key='1': must be a positive int"),
        ({"rate_limit": 10}, "rate_limit=10: must be a (count, window) pair"),
        ({"rate_limit": (10,)}, "must be a (count, window) pair"),
        ({"rate_limit": [10, 1.0]}, "must be a (count, window) pair"),
        ({"rate_limit": (0, 1.0)}, "rate_limit=0: must be between 1 and"),
        ({"rate_limit": (None, 1.0)}, "count must be a positive int"),
        ({"rate_limit": (10, 0)}, "window must be a positive, finite duration"),
        ({"rate_limit": (10, timedelta(seconds=-1))}, "window must be a positive"),
        ({"rate_limit": (10, float("inf"))}, "window must be a positive, finite"),
        ({"rate_limit": (10, float("nan"))}, "window must be a positive, finite"),
        ({"rate_limit": (10, "1s")}, "window must be a timedelta or seconds, not str"),
        ({"rate_limit": (10, timedelta(days=2))}, "window must be at most one day"),
    ],
)
def test_bad_limit_is_a_configuration_error_at_the_decorator(options, message):
    jobs = new_queue()
    with pytest.raises(ConfigurationError, match="task 'k': .*" + _escape(message)):
        jobs.task("k", **options)(_noop)
    assert jobs.get_task("k") is None


def _escape(text):
    import re

    return re.escape(text)


def test_concurrency_key_validation():
    per_key = Limits(max_running_per_key=1)
    assert check_concurrency_key(None, per_key) is None
    assert check_concurrency_key("customer:42", None) == "customer:42"  # task unknown here
    for bad, message in [
        (42, "must be a str or None, not int"),
        ("", "must not be empty"),
        ("x" * 513, "must be at most 512 characters"),
        ("a\x00b", "NUL"),
        ("\ud800", "not valid Unicode"),
    ]:
        with pytest.raises(ValidationError, match=_escape(message)) as raised:
            check_concurrency_key(bad, per_key)
        assert raised.value.field == "concurrency_key"
    with pytest.raises(ValidationError, match="has no max_running_per_key"):
        check_concurrency_key("customer:42", Limits(max_running=2))


def test_enqueue_refuses_a_bad_concurrency_key_before_touching_the_session():
    jobs = new_queue()
    jobs.task("charge", max_running_per_key=1)(_noop)
    jobs.task("plain")(_noop)

    session = Session()  # no bind: any statement it ran would fail otherwise
    with pytest.raises(ValidationError, match="concurrency_key=''"):
        jobs.enqueue(session, "charge", {}, concurrency_key="")
    with pytest.raises(ValidationError, match="has no max_running_per_key"):
        jobs.enqueue(session, "plain", {}, concurrency_key="c:1")
    with pytest.raises(ValidationError, match=r"items\[1\]: concurrency_key=5"):
        jobs.enqueue_many(
            session,
            [
                {"kind": "charge", "concurrency_key": "c:1"},
                {"kind": "charge", "concurrency_key": 5},
            ],
        )


def test_backoff_doubles_up_to_its_cap_and_resets_when_a_slot_frees():
    now = [0.0]
    backoff = KindBackoff(clock=lambda: now[0])
    delays = []
    for _ in range(8):
        backoff.gave_nothing("k")
        start = now[0]
        while not backoff.due("k"):
            now[0] += 0.001
        delays.append(round(now[0] - start, 3))
    assert delays[0] == pytest.approx(MIN_BACKOFF, abs=0.002)
    assert delays[1] == pytest.approx(4 * MIN_BACKOFF, abs=0.002)
    assert max(delays) == pytest.approx(MAX_BACKOFF, abs=0.002)
    assert delays[-1] == pytest.approx(MAX_BACKOFF, abs=0.002)
    backoff.gave_nothing("k")
    assert not backoff.due("k")
    assert backoff.due("other")  # kinds back off on their own
    backoff.freed(["k"])
    assert backoff.due("k")
    backoff.gave_nothing("k")  # and start again from the shortest delay
    now[0] += MIN_BACKOFF
    assert backoff.due("k")


def test_a_rate_limited_kind_backs_off_at_most_one_starts_share_of_its_window():
    now = [0.0]
    limits = {
        "rated": check_limits(rate_limit=(5, 1.0)),
        "slow_rate": check_limits(rate_limit=(1, 60.0)),
        "capped": check_limits(max_running=2),
    }
    claims = LimitedClaims(None, limits, clock=lambda: now[0])  # type: ignore[arg-type]
    assert claims.kinds == ["capped", "rated", "slow_rate"]

    def longest(kind):
        for _ in range(10):
            claims.backoff.gave_nothing(kind)
        start = now[0]
        while not claims.backoff.due(kind):
            now[0] += 0.001
        return round(now[0] - start, 3)

    # Idle (it never leased a job): the plain backoff.
    assert longest("rated") == pytest.approx(MAX_BACKOFF, abs=0.002)
    claims.backoff.gave_some("rated")  # it leased jobs: its window is likely full now
    assert longest("rated") == pytest.approx(0.2, abs=0.002)  # 1 s / 5 starts
    now[0] += 1.5  # more than a window since it leased any
    assert longest("rated") == pytest.approx(MAX_BACKOFF, abs=0.002)
    claims.backoff.gave_some("slow_rate")
    assert longest("slow_rate") == pytest.approx(MAX_BACKOFF, abs=0.002)  # 60 s / 1
    claims.backoff.gave_some("capped")
    assert longest("capped") == pytest.approx(MAX_BACKOFF, abs=0.002)


def test_limits_describe():
    assert check_limits().describe() == "unlimited"
    assert (
        check_limits(max_running=2, max_running_per_key=1, rate_limit=(5, 1)).describe()
        == "max_running=2, max_running_per_key=1, rate_limit=5/1s"
    )
