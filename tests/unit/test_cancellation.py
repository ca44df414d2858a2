"""Stopping attempts: cancellation, timeouts and shutdown bookkeeping, on a fake clock."""

from __future__ import annotations

import threading

from sa_jobqueue.worker.running import RunningAttempts, Stop, Watchdog, format_timeout


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_timeouts_fire_at_their_deadline_only():
    clock = Clock()
    attempts = RunningAttempts(clock)
    slow = attempts.start((1, 1), timeout=2.0)
    untimed = attempts.start((2, 1), timeout=None)
    assert attempts.next_deadline() == 102.0
    clock.now = 101.9
    assert attempts.overdue() == []
    assert not slow.is_set()
    clock.now = 102.0
    assert attempts.overdue() == [(1, 1)]
    assert slow.is_set()
    assert not untimed.is_set()
    assert attempts.reason((1, 1)) is Stop.TIMED_OUT
    assert attempts.overdue() == []  # once
    assert attempts.next_deadline() is None
    assert attempts.finish((1, 1)) is Stop.TIMED_OUT  # its late report is to be dropped
    assert attempts.finish((2, 1)) is None


def test_cancel_is_keyed_by_id_and_attempt():
    attempts = RunningAttempts(Clock())
    old = attempts.start((7, 1), timeout=None)
    other = attempts.start((8, 1), timeout=None)
    assert attempts.cancel(7, attempt=2) == []
    assert not old.is_set()
    assert attempts.cancel(7) == [(7, 1)]
    assert old.is_set()
    assert not other.is_set()
    assert attempts.cancel(7) == []  # already cancelled
    assert attempts.cancel(99) == []  # not running here


def test_shutdown_tells_everyone_but_keeps_earlier_reasons():
    clock = Clock()
    attempts = RunningAttempts(clock)
    attempts.start((1, 1), timeout=1.0)
    attempts.start((2, 1), timeout=None)
    attempts.cancel(2)
    assert sorted(attempts.shutdown()) == [(1, 1)]
    assert attempts.reason((2, 1)) is Stop.CANCELLED
    assert attempts.reason((1, 1)) is Stop.SHUTDOWN
    # A timeout still applies to an attempt told about the shutdown (it must not
    # hold its slot forever), and then it is the timeout that counts.
    clock.now = 101.0
    assert attempts.overdue() == [(1, 1)]
    assert attempts.finish((1, 1)) is Stop.TIMED_OUT
    assert attempts.shutdown() == []


def test_watchdog_calls_back_for_each_overdue_attempt():
    attempts = RunningAttempts()
    stopped = threading.Event()
    fired: list[tuple[int, int]] = []
    done = threading.Event()

    def on_timeout(key, subject):
        assert subject == "job"
        fired.append(key)
        done.set()

    watchdog = Watchdog(attempts, on_timeout, stopped)
    watchdog.start()
    try:
        attempts.start((5, 2), timeout=0.05, subject="job")
        assert done.wait(5)
        assert fired == [(5, 2)]
    finally:
        stopped.set()
        attempts.wake()
        watchdog.join(5)
    assert not watchdog.is_alive()


def test_the_timeout_error_names_the_timeout():
    assert "timeout of 1.5s" in format_timeout(1.5)


def test_a_cancel_that_finds_nothing_running_stops_an_attempt_claimed_before_it():
    clock = Clock()
    attempts = RunningAttempts(clock)
    assert attempts.cancelled_before_start(5, claimed_at=99.0) is False  # nothing cancelled
    clock.now = 101.0
    assert attempts.cancel(5) == []  # claimed ahead at 100.0, waiting for a slot
    assert attempts.cancelled_before_start(6, claimed_at=100.0) is False  # another job
    assert attempts.cancelled_before_start(5, claimed_at=102.0) is False  # claimed after it
    assert attempts.cancelled_before_start(5, claimed_at=100.0) is True
    assert attempts.cancelled_before_start(5, claimed_at=100.0) is False  # once


def test_cancels_of_attempts_not_running_are_remembered_up_to_a_bound():
    from sa_jobqueue.worker.running import CANCELLED_EARLY_KEPT

    attempts = RunningAttempts(Clock())
    for job_id in range(CANCELLED_EARLY_KEPT + 10):
        attempts.cancel(job_id)
    assert attempts.cancelled_before_start(0, claimed_at=0.0) is False  # the oldest went
    assert attempts.cancelled_before_start(CANCELLED_EARLY_KEPT + 9, claimed_at=0.0) is True
    running = attempts.start((10**6, 1), timeout=None)
    attempts.cancel(10**6)  # running: stopped, not remembered as early
    assert running.is_set()
    attempts.finish((10**6, 1))
    assert attempts.cancelled_before_start(10**6, claimed_at=0.0) is False
