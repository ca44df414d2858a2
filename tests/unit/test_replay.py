"""`sa_jobqueue.testing.replay` over hand-made exports: what it catches, what it lets by."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.ops.job_export import EXPORT_FORMAT
from sa_jobqueue.testing import replay
from tests.support.models import Job


def _export(*steps: tuple[str, str, object, int], kind: str = "flow") -> dict[str, Any]:
    """An export of job 7 whose steps were recorded at the given instants (seconds)."""
    job = {"id": 7, "kind": kind, "queue": "default", "payload": {}, "attempts": 2}
    job |= {"max_attempts": 5, "idempotency_key": None, "status": "pending"}
    rows = [
        {"name": n, "kind": k, "result": r, "attempt": 1, "recorded_at": f"t{t}", "until": None}
        for n, k, r, t in steps
    ]
    return {"format": EXPORT_FORMAT, "job": job, "steps": rows, "signals": []}


def _queue(*names: str, async_: bool = False) -> JobQueue[Job]:
    """A queue whose ``flow`` handler reaches step `names` in this order (never runs them)."""
    jobs = JobQueue(Job)

    def boom() -> None:
        raise AssertionError("a replay ran a step's function")

    if async_:

        async def flow_async(ctx: JobContext) -> None:
            for name in names:
                await ctx.astep(name, boom)

        jobs.task("flow")(flow_async)
    else:
        jobs.task("flow")(lambda ctx: [ctx.step(name, boom) for name in names])
    return jobs


def test_the_same_steps_in_the_same_order_replay_cleanly_and_stop_at_new_work():
    seen = replay(_queue("a", "b", "c"), _export(("a", "step", 1, 1), ("b", "step", 2, 2)))
    assert (seen.reached, seen.stopped_at, seen.error) == (["a", "b", "c"], "c", None)


def test_a_renamed_step_is_named_as_run_again_with_the_recorded_ones_ahead_of_it():
    export = _export(("a", "step", 1, 1), ("b", "step", 2, 2), ("c", "step", 3, 3))
    with pytest.raises(AssertionError) as caught:
        replay(_queue("a", "b2", "c"), export)
    message = str(caught.value)
    assert "job 7 ('flow')" in message
    assert "would run step 'b2', which the job never recorded, before recorded 'b', 'c'" in message


def test_a_skipped_step_and_a_step_reached_out_of_order_are_both_named():
    export = _export(("a", "step", 1, 1), ("b", "step", 2, 2), ("c", "step", 3, 3))
    with pytest.raises(AssertionError) as caught:
        replay(_queue("b", "a"), export)
    message = str(caught.value)
    assert "never reaches recorded 'c'" in message
    assert "reaches 'b' before 'a', which the job recorded first" in message


def test_steps_recorded_at_the_same_instant_may_be_reached_in_either_order():
    export = _export(("a", "step", 1, 1), ("b", "step", 2, 1), ("a#1.1", "try", "x", 0))
    assert replay(_queue("b", "a"), export).reached == ["b", "a"]


def test_an_async_handler_replays_from_an_export_file(tmp_path):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(_export(("a", "step", 1, 1), ("b", "step", 2, 2))))
    with pytest.raises(AssertionError, match="never reaches recorded 'b'"):
        replay(_queue("a", async_=True), path)
    assert replay(_queue("a", "b", async_=True), str(path)).stopped_at is None


def test_a_marker_takes_the_old_path_in_a_replay_of_a_job_past_it():
    jobs = JobQueue(Job)

    @jobs.task("flow")
    def flow(ctx: JobContext) -> None:
        ctx.step("a", lambda: 1)
        if ctx.patched("new"):
            ctx.step("inserted", lambda: 2)
        ctx.step("b", lambda: 3)

    seen = replay(jobs, _export(("a", "step", 1, 1), ("b", "step", 3, 2)))
    assert (seen.reached, seen.patches) == (["a", "new", "b"], {"new": False})
    seen = replay(jobs, _export(("a", "step", 1, 1)))
    assert (seen.reached, seen.stopped_at, seen.patches) == (
        ["a", "new", "inserted"],
        "inserted",
        {"new": True},
    )


def test_a_bad_source_is_refused_in_one_line():
    jobs = _queue("a")
    with pytest.raises(ConfigurationError, match="needs an export of `sa-jobqueue jobs export ID`"):
        replay(jobs, {"job": {}})
    with pytest.raises(ConfigurationError, match="the export is of job 7, not 8"):
        replay(jobs, _export(), 8)
    with pytest.raises(ConfigurationError, match="no task registered as 'other'"):
        replay(jobs, _export(kind="other"))


def test_a_transactional_handler_needs_a_session():
    jobs = JobQueue(Job)
    jobs.task("flow", transactional=True)(lambda ctx: None)
    with pytest.raises(ConfigurationError, match="transactional: pass session="):
        replay(jobs, _export())
