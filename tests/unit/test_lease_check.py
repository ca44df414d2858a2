from __future__ import annotations

from sa_jobqueue.worker.attempt import Claimed, InFlight
from sa_jobqueue.worker.run.lease_check import FRESH_FRACTION, LeaseCheck


def _job(claimed_at: float, lease: float = 10.0) -> Claimed:
    return Claimed(1, "k", "default", {}, 1, 3, None, lease, claimed_at=claimed_at)


def test_a_lease_confirmed_lately_starts_without_a_statement_and_an_old_one_does_not():
    now = [100.0]
    inflight = InFlight()
    job = _job(claimed_at=100.0)
    inflight.add([job], confirmed=99.0)
    check = LeaseCheck(
        None,  # type: ignore[arg-type]  # fresh() runs no statement
        None,  # type: ignore[arg-type]
        "w",
        confirmed=inflight.confirmed,
        renewed=inflight.renewed,
        clock=lambda: now[0],
    )
    assert check.fresh(job)
    now[0] = 99.0 + 10.0 * FRESH_FRACTION  # half a lease since the claim round began
    assert not check.fresh(job)
    inflight.renewed([job.key], 104.0)  # a heartbeat sent at 104 extended it
    assert check.fresh(job)
    inflight.renewed([job.key], 50.0)  # an older confirmation never moves it back
    assert inflight.confirmed(job) == 104.0


def test_a_recorded_attempt_forgets_its_confirmation():
    inflight = InFlight()
    job = _job(claimed_at=7.0)
    inflight.add([job], confirmed=5.0)
    inflight.remove([job])
    inflight.renewed([job.key], 9.0)  # a late heartbeat of an attempt no longer booked
    assert inflight.confirmed(job) == 7.0


def test_the_ahead_wait_default_is_the_claim_loops():
    from sa_jobqueue.worker.config import DEFAULT_AHEAD_WAIT
    from sa_jobqueue.worker.loop import AHEAD_WAIT

    assert DEFAULT_AHEAD_WAIT == AHEAD_WAIT
