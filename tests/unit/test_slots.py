"""`Slots`: the worker's concurrency, shared by its handler threads and its event loop."""

from __future__ import annotations

import threading
from typing import Any

from sa_jobqueue.worker.attempt import Claimed, Outcome, Result
from sa_jobqueue.worker.run.slots import EitherWaiting, Slots, WaitingJobs


def test_a_full_set_of_slots_takes_no_more_until_one_is_given_back():
    slots = Slots(2)
    assert slots.try_take((1, 1))
    assert slots.try_take((2, 1))
    assert not slots.try_take((3, 1))
    assert slots.try_take((1, 1))  # a key holding a slot keeps it
    slots.give([(1, 1)])
    assert slots.try_take((3, 1))
    assert len(slots) == 2


def test_giving_back_a_key_twice_or_one_that_holds_nothing_frees_nothing_more():
    freed: list[int] = []
    slots = Slots(1)
    slots.on_free(lambda: freed.append(1))
    slots.try_take((1, 1))
    slots.give([(1, 1)])
    slots.give([(1, 1), (9, 9)])
    assert freed == [1]
    assert len(slots) == 0


def test_a_waiting_thread_takes_the_slot_given_back():
    slots = Slots(1)
    slots.try_take((1, 1))
    taken = threading.Event()

    def wait_for_slot() -> None:
        slots.take((2, 1), stopping=lambda: False)
        taken.set()

    thread = threading.Thread(target=wait_for_slot)
    thread.start()
    assert not taken.wait(0.05)
    slots.give([(1, 1)])
    assert taken.wait(5)
    thread.join(5)
    assert not slots.try_take((3, 1))


def test_a_waiting_thread_stops_waiting_once_the_worker_stops():
    slots = Slots(1)
    slots.try_take((1, 1))
    stopping = threading.Event()
    thread = threading.Thread(target=slots.take, args=((2, 1), stopping.is_set))
    thread.start()
    stopping.set()
    thread.join(5)
    assert not thread.is_alive()
    assert len(slots) == 1  # it took none


class _Pool:
    def __init__(self, claimed_at: list[float]) -> None:
        self.claimed_at = claimed_at

    def oldest_waiting(self) -> float | None:
        return min(self.claimed_at, default=None)

    def withdraw(self, claimed_before: float) -> list[Any]:
        taken = [t for t in self.claimed_at if t < claimed_before]
        self.claimed_at = [t for t in self.claimed_at if t >= claimed_before]
        return taken


def test_either_waiting_reads_the_oldest_job_of_both_pools_and_withdraws_from_both():
    threads, loop = _Pool([5.0, 7.0]), _Pool([3.0])
    waiting = EitherWaiting(threads, loop)
    assert waiting.oldest_waiting() == 3.0
    withdrawn: list[Any] = waiting.withdraw(6.0)
    assert sorted(withdrawn) == [3.0, 5.0]
    assert waiting.oldest_waiting() == 7.0
    assert EitherWaiting(_Pool([])).oldest_waiting() is None


def _claimed(job_id: int, claimed_at: float) -> Claimed:
    return Claimed(job_id, "k", "default", {}, 1, 3, None, 30.0, claimed_at=claimed_at)


def test_waiting_jobs_are_taken_once_by_the_pool_or_the_claim_loop_in_claim_order():
    reported: list[Outcome] = []
    waiting = WaitingJobs(reported.extend)
    waiting.add([_claimed(1, 1.0), _claimed(2, 2.0), _claimed(3, 3.0), _claimed(4, 4.0)])
    assert waiting.oldest_waiting() == 1.0
    assert waiting.take((2, 1))
    assert not waiting.take((2, 1))  # started once
    assert [job.id for job in waiting.withdraw(3.5)] == [1, 3]
    assert not waiting.take((1, 1))  # withdrawn: the pool does not start it
    assert waiting.oldest_waiting() == 4.0
    assert waiting
    assert [job.id for job in waiting.take_while(lambda key: True)] == [4]
    assert not waiting
    assert waiting.oldest_waiting() is None
    assert reported == []


def test_waiting_jobs_start_while_slots_allow_and_the_rest_are_released_at_shutdown():
    reported: list[Outcome] = []
    waiting = WaitingJobs(reported.extend)
    waiting.add([_claimed(1, 1.0), _claimed(2, 2.0), _claimed(3, 3.0)])
    slots = Slots(1)
    assert [job.id for job in waiting.take_while(slots.try_take)] == [1]
    assert waiting.release_unstarted() == 2
    assert [(o.job.id, o.result) for o in reported] == [(2, Result.RELEASE), (3, Result.RELEASE)]
    assert waiting.release_unstarted() == 0
    assert len(reported) == 2
