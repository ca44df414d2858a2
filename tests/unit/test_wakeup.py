"""The wake-up policy with a fake clock: no database, no sleeping."""

from __future__ import annotations

import pytest

from sa_jobqueue.driver import NextDue
from sa_jobqueue.worker.wakeup import Notified, WakeEvent, WakeupPolicy

POLL = 10.0


def policy() -> WakeupPolicy:
    return WakeupPolicy(POLL, jitter=lambda: 1.0)


def test_an_idle_loop_sleeps_until_the_next_poll():
    p = policy()
    assert p.begin_wait(100.0, claimed=0, free=4, processed=0)  # first time: learn
    p.learned(100.0, 5000.0, NextDue(None, 5000.0), processed=0)
    assert p.timeout(100.0) == pytest.approx(POLL)
    assert p.timeout(107.5) == pytest.approx(2.5)
    assert p.timeout(200.0) == 0.0


def test_polls_are_jittered_so_workers_do_not_poll_in_step():
    p = WakeupPolicy(POLL, jitter=lambda: 0.9)
    p.begin_wait(0.0, claimed=0, free=1, processed=0)
    assert p.timeout(0.0) == pytest.approx(9.0)


def test_a_scheduled_job_shortens_the_sleep_to_its_run_at():
    p = policy()
    p.begin_wait(100.0, claimed=0, free=4, processed=0)
    p.learned(100.0, 5000.0, NextDue(3.0, 5000.0), processed=0)
    assert p.timeout(100.0) == pytest.approx(3.0)
    assert p.due_at == pytest.approx(103.0)


def test_a_full_round_does_not_ask_the_database_when_the_next_job_is_due():
    p = policy()
    p.begin_wait(0.0, claimed=0, free=1, processed=0)
    p.learned(0.0, 0.0, NextDue(None, 0.0), processed=0)
    assert not p.begin_wait(1.0, claimed=4, free=4, processed=0)


def test_it_asks_again_only_after_a_poll_or_finished_jobs():
    p = policy()
    assert p.begin_wait(0.0, claimed=0, free=1, processed=0)
    p.learned(0.0, 0.0, NextDue(None, 0.0), processed=0)
    p.woke(1.0, timed_out=False)  # a notification: its payload said when
    assert not p.begin_wait(1.0, claimed=0, free=1, processed=0)
    assert p.begin_wait(2.0, claimed=0, free=1, processed=3)  # jobs finished meanwhile
    p.learned(2.0, 0.0, NextDue(None, 0.0), processed=3)
    p.woke(12.0, timed_out=True)  # a poll
    assert p.begin_wait(12.0, claimed=0, free=1, processed=3)


def test_a_due_but_unclaimed_job_is_looked_at_again_soon_backing_off():
    p = policy()
    waits = []
    for _ in range(4):
        p.begin_wait(0.0, claimed=0, free=1, processed=0)
        p.learned(0.0, 0.0, NextDue(0.0, 0.0), processed=0)
        waits.append(p.timeout(0.0))
        p.woke(waits[-1], timed_out=True)
    assert waits == sorted(waits)
    assert waits[0] == pytest.approx(0.02)
    assert waits[-1] < POLL


def test_a_run_at_that_passed_before_the_round_is_forgotten_after_it():
    p = policy()
    p.begin_wait(0.0, claimed=0, free=1, processed=0)
    p.learned(0.0, 0.0, NextDue(5.0, 0.0), processed=0)
    p.woke(5.0, timed_out=True)  # the round at 5.0 claimed it
    p.begin_wait(5.1, claimed=1, free=4, processed=0)
    assert p.due_at is None
    assert p.timeout(5.1) == pytest.approx(POLL)


def test_a_due_notification_asks_for_a_claim_round():
    p = policy()
    assert p.notified(0.0, 0.0, "mail", None) is Notified.CLAIM


def test_a_reconnect_asks_for_a_round_and_to_learn_again():
    p = policy()
    p.begin_wait(0.0, claimed=0, free=1, processed=0)
    p.learned(0.0, 0.0, NextDue(None, 0.0), processed=0)
    assert p.notified(1.0, 1.0, None, None) is Notified.CLAIM
    p.woke(1.0, timed_out=False)
    assert p.begin_wait(1.0, claimed=0, free=1, processed=0)


def test_a_later_job_nudges_once_and_only_when_sooner():
    p = policy()
    p.begin_wait(100.0, claimed=0, free=1, processed=0)
    p.learned(100.0, 5000.0, NextDue(None, 5000.0), processed=0)
    assert p.notified(100.0, 5000.0, "mail", 5004.0) is Notified.NUDGE
    assert p.timeout(100.0) == pytest.approx(4.0)
    assert p.notified(100.0, 5000.0, "mail", 5006.0) is Notified.NOTHING
    assert p.notified(100.0, 5000.0, "mail", 5001.0) is Notified.NUDGE
    assert p.timeout(100.0) == pytest.approx(1.0)


def test_notified_run_at_is_placed_by_the_database_clock_not_the_worker_clock():
    # The worker's wall clock is 20 s slow: 4980 while the database says 5000.
    p = policy()
    p.begin_wait(100.0, claimed=0, free=1, processed=0)
    p.learned(100.0, 4980.0, NextDue(None, 5000.0), processed=0)
    # A job due at 5002 on the database clock is due in 2 s, not in 22 s.
    assert p.notified(100.0, 4980.0, "mail", 5002.0) is Notified.NUDGE
    assert p.timeout(100.0) == pytest.approx(2.0)


def test_a_later_job_heard_before_the_clock_is_known_is_learned_from_the_database():
    # Just started: the listener heard a job due later before the loop asked the
    # database anything. The worker's wall clock is 20 s slow; trusting it would put
    # the job 22 s away. Instead: a round, then ask the database.
    p = policy()
    assert p.notified(100.0, 4980.0, "mail", 5002.0) is Notified.CLAIM
    p.woke(100.0, timed_out=False)
    assert p.begin_wait(100.0, claimed=0, free=1, processed=0)
    p.learned(100.0, 4980.0, NextDue(2.0, 5000.0), processed=0)
    assert p.timeout(100.0) == pytest.approx(2.0)


def test_a_reconnect_heard_while_the_loop_asks_is_not_lost_with_that_answer():
    # The loop asks; the listener reconnects (or hears a job before the clock is known)
    # before the answer comes back; the answer was read before the news, so the loop
    # must ask again after the round the news asked for.
    p = policy()
    assert p.begin_wait(0.0, claimed=0, free=1, processed=0)
    assert p.notified(0.1, 0.1, None, None) is Notified.CLAIM
    p.learned(0.2, 0.2, NextDue(None, 0.2), processed=0)
    p.woke(0.2, timed_out=False)
    assert p.begin_wait(0.3, claimed=0, free=1, processed=0)
    p.learned(0.4, 0.4, NextDue(2.0, 0.4), processed=0)
    p.woke(0.4, timed_out=False)
    assert not p.begin_wait(0.5, claimed=0, free=1, processed=0)
    assert p.timeout(0.5) == pytest.approx(1.9)


def test_wake_event_tells_a_claim_from_a_nudge():
    event = WakeEvent()
    event.nudge()
    assert event.is_set()
    assert event.take() is False
    assert not event.is_set()
    event.set()
    assert event.take() is True
    assert event.take() is False
