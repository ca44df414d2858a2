"""Fair claims through `job_claim_limited`: keys take turns, by weight, within per-key caps."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from sqlalchemy import Engine, delete, insert, select, update

from sa_jobqueue.core.limits import check_limits
from sa_jobqueue.driver import Driver
from sa_jobqueue.schema.state_tables import turns_table_for
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


def by_turns(db: Engine, kind: str, limit: int) -> list[int]:
    """The ids a fair claim of `limit` must lease: the policy computed over every due job.

    Stride scheduling as `Driver.job_claim_limited` documents it (keyed jobs only): a
    key stands at its ``pass`` (at least the lowest one stored among the keys with due
    jobs), a new key one turn before that; its i-th due job's turn is ``stand + (i - 1)
    / weight``; the lowest turns win, a tie going to a new key, then to claim order.
    """
    turns, weights = turns_table_for(Job.__table__), weights_of(Job)  # type: ignore[arg-type]
    with db.connect() as conn:
        due: list[tuple[int, str]] = [
            (job_id, key or "")  # keyed jobs only here
            for job_id, key in conn.execute(
                select(Job.id, Job.concurrency_key)
                .where(Job.kind == kind, Job.status == "pending")
                .order_by(Job.priority, Job.run_at, Job.id)
            )
        ]
        stored = dict(
            conn.execute(select(turns.c.key, turns.c["pass"]).where(turns.c.kind == kind)).all()
        )
        weight_of = dict(conn.execute(select(weights.c.key, weights.c.weight)).all())
    keys = {key for _, key in due}
    base = min((stored[key] for key in keys if key in stored), default=0.0)
    seen: dict[str, int] = {}
    ranked = []
    for place, (job_id, key) in enumerate(due):
        weight = float(weight_of.get(key, 1))
        stand = max(stored[key], base) if key in stored else base - 1.0 / weight
        seen[key] = seen.get(key, 0) + 1
        ranked.append((stand + (seen[key] - 1) / weight, key in stored, place, job_id))
    return sorted(job_id for *_, job_id in sorted(ranked)[:limit])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_claim_fair_leases_what_the_turns_over_every_due_job_give(
    db: Engine, make_driver: Callable[..., Driver], seed: int
):
    # Keys of uneven backlogs and weights, claims of uneven sizes: each claim leases
    # the jobs the policy gives when computed over every due job (not only the first
    # few of each key that a claim reads).
    rng = random.Random(seed)  # noqa: S311 - reproducible cases, not secrets
    driver = make_driver(limits=FAIR)
    weights = weights_of(Job)
    keys = [f"k{i}" for i in range(12)]
    with db.begin() as conn:
        conn.execute(
            insert(weights), [{"key": key, "weight": rng.choice([1, 2, 3])} for key in keys[:4]]
        )
    try:
        for key in keys:
            add(
                db,
                rng.choice([1, 2, 5, 20]),
                kind="fair",
                concurrency_key=key,
                priority=rng.choice([0, 0, 1]),
            )
        for _ in range(12):
            limit = rng.choice([1, 3, 8, 16])
            expected = by_turns(db, "fair", limit)
            with db.begin() as conn:
                got = driver.job_claim_limited(conn, "fair", ["default"], limit, OWNER)
                ids = [job.id for job in got]
                conn.execute(update(Job).where(Job.id.in_(ids)).values(status="done"))
            assert sorted(ids) == expected
            if rng.random() < 0.3:  # a key comes back (new again) or arrives mid-way
                add(
                    db, rng.choice([1, 4]), kind="fair", concurrency_key=rng.choice([*keys, "late"])
                )
    finally:
        with db.begin() as conn:
            conn.execute(delete(weights))
