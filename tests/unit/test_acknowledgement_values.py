"""The values a round's acknowledgement is built from and read back into."""

from __future__ import annotations

from sa_jobqueue.driver.postgres.completion import fence_literals
from sa_jobqueue.driver.postgres.runtime import fence_params
from sa_jobqueue.driver.values import Claimed, Held
from sa_jobqueue.worker.attempt import InFlight


def _job(job_id: int, attempt: int) -> Claimed:
    return Claimed(job_id, "k", "default", {}, attempt, 3, None, 30.0)


def test_fence_literals_are_the_fence_params_arrays_as_postgresql_array_text():
    jobs = [_job(7, 1), _job(12345678901, 3)]
    assert fence_literals(jobs, "w:1") == {
        "ids": "{7,12345678901}",
        "attempt_numbers": "{1,3}",
        "owner": "w:1",
    }
    params = fence_params(jobs, "w:1")
    assert fence_literals(jobs, "w:1")["ids"] == "{" + ",".join(map(str, params["ids"])) + "}"


def test_held_from_rows_keeps_each_attempt_and_lists_those_with_dependents():
    held = Held.from_rows([(1, 1, False), (2, 3, True), (3, 1, None), (4, 2, True)])
    assert held == {(1, 1), (2, 3), (3, 1), (4, 2)}
    assert held.with_dependents == [2, 4]
    assert Held.from_rows([(1, 1, False)]).with_dependents == []
    assert Held.from_rows([]) == set()


def test_inflight_count_is_how_many_of_the_keys_are_booked():
    inflight = InFlight()
    inflight.add([_job(1, 1), _job(2, 1)])
    assert inflight.count({(1, 1), (2, 2), (3, 1)}) == 1
    assert inflight.count(set()) == 0
