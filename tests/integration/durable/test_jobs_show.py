"""``sa-jobqueue jobs show`` prints a job's progress, steps, sleeps and signals."""

from __future__ import annotations

import json

from click.testing import CliRunner
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.cli import main
from sa_jobqueue.testing import drain
from tests.support.models import Job


def test_jobs_show_prints_steps_the_awaited_signal_and_progress(committed, database_url):
    jobs = JobQueue(Job)

    @jobs.task("saga")
    def saga(ctx: JobContext) -> None:
        ctx.step("charge", lambda: {"charge_id": "ch_1"})
        ctx.progress(0.25)
        ctx.wait_for_signal("shipped")

    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "saga", {}).id
        jobs.signal(session, job_id, "early", {"n": 1})  # kept: nobody waits for it yet
    assert [o.outcome for o in drain(jobs, committed)] == ["parked"]

    def show(*extra: str) -> str:
        result = CliRunner().invoke(
            main, ["jobs", "show", str(job_id), *extra], env={"DATABASE_URL": database_url}
        )
        assert result.exit_code == 0, result.stderr
        return result.stdout

    text = show()
    assert "progress: 0.25" in text
    assert "parked for: signal shipped" in text
    assert "charge step (attempt 1, " in text
    assert '{"charge_id": "ch_1"}' in text
    assert "shipped wait (attempt 1, " in text
    assert "waiting, no timeout" in text
    assert "early sent " in text
    assert 'not taken yet: {"n": 1}' in text
    shown = json.loads(show("--json"))
    assert shown["progress"] == 0.25
    assert shown["parked_for"] == "signal shipped"
    assert [(s["name"], s["kind"]) for s in shown["steps"]] == [
        ("charge", "step"),
        ("shipped", "wait"),
    ]
    assert [(s["name"], s["consumed_at"]) for s in shown["signals"]] == [("early", None)]


def test_the_dashboards_job_page_shows_progress_as_a_bar_or_its_object(committed):
    from starlette.testclient import TestClient

    from sa_jobqueue.dashboard import make_app
    from tests.support.models import new_queue

    with Session(committed) as session, session.begin():
        number = Job(kind="k", progress=0.25)
        shaped = Job(kind="k", progress={"done": 5, "total": 10})
        session.add_all([number, shaped])
        session.flush()
        ids = number.id, shaped.id
    client = TestClient(make_app(new_queue(), committed), base_url="http://127.0.0.1")
    page = client.get(f"/jobs/{ids[0]}").text
    assert '<progress max="1" value="0.25"></progress> 25%' in page
    page = client.get(f"/jobs/{ids[1]}").text
    assert "&#34;done&#34;: 5" in page or '"done": 5' in page
