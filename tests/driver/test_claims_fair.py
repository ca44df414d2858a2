"""Fair claims through `job_claim_limited`: keys take turns, by weight, within per-key caps."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Engine, delete, insert, select, update

from sa_jobqueue.core.limits import check_limits
from sa_jobqueue.driver import Driver
from sa_jobqueue.statements.fair_weights import weights_of
from tests.driver.conftest import OWNER, add
from tests.support.models import Job

FAIR = {
    "fair": check_limits(fair=True),
    "capped": check_limits(fair=True, max_running_per_key=1, max_running=3),
}


def started_keys(db: Engine, driver: Driver, kind: str, n: int) -> list[list[str]]:
    """Claim `n` at a time until none is left, each round done before the next: its keys."""
    rounds: list[list[str]] = []
    while True:
        with db.begin() as conn:
            got = driver.job_claim_limited(conn, kind, ["default"], n, OWNER)
            ids = [job.id for job in got]
            if not ids:
                return rounds
            keys = dict(
                conn.execute(select(Job.id, Job.concurrency_key).where(Job.id.in_(ids))).all()
            )
            conn.execute(update(Job).where(Job.id.in_(ids)).values(status="done"))
        rounds.append(sorted(keys[i] or "" for i in ids))


def test_claim_fair_takes_turns_between_keys_whoever_enqueued_first(
    db: Engine, make_driver: Callable[..., Driver]
):
    driver = make_driver(limits=FAIR)
    add(db, 8, kind="fair", concurrency_key="heavy")
    for i in range(3):
        add(db, 2, kind="fair", concurrency_key=f"light{i}")
    everyone = ["heavy", "light0", "light1", "light2"]
    assert started_keys(db, driver, "fair", 4) == [everyone, everyone, ["heavy"] * 4, ["heavy"] * 2]


def test_claim_fair_gives_a_key_of_weight_three_three_turns_per_round(
    db: Engine, make_driver: Callable[..., Driver]
):
    driver = make_driver(limits=FAIR)
    weights = weights_of(Job)
    with db.begin() as conn:
        conn.execute(insert(weights).values(key="gold", weight=3))
    try:
        add(db, 8, kind="fair", concurrency_key="free")
        add(db, 8, kind="fair", concurrency_key="gold")
        started = [keys[0] for keys in started_keys(db, driver, "fair", 1)]
    finally:
        with db.begin() as conn:
            conn.execute(delete(weights))
    # Each gets its first turn (new keys stand one turn before the others), then three
    # gold per free, by turns (``pass`` exact: 1/3 steps must not drift), then the rest.
    assert started[:2] == ["free", "gold"]
    assert started[2:10] == ["free", "gold", "gold", "gold"] * 2
    assert started[10:] == ["gold"] + ["free"] * 5


def test_claim_fair_passes_over_a_key_at_its_limit(db: Engine, make_driver: Callable[..., Driver]):
    driver = make_driver(limits=FAIR)
    add(db, 3, kind="capped", concurrency_key="a")
    add(db, 3, kind="capped", concurrency_key="b")
    add(db, 1, kind="capped", concurrency_key="c")
    add(db, 1, kind="capped", concurrency_key="d")
    with db.begin() as conn:
        first = driver.job_claim_limited(conn, "capped", ["default"], 10, OWNER)
    with db.begin() as conn:
        again = driver.job_claim_limited(conn, "capped", ["default"], 10, OWNER)
    # One per key (max_running_per_key=1), three in all (max_running=3), none after.
    assert len(first) == 3
    assert again == []
