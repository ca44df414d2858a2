"""`sa-jobqueue pause` of a queue that no job and no task uses is a typo until --force says not."""

from __future__ import annotations

from click.testing import CliRunner
from sqlalchemy.orm import Session

from sa_jobqueue.cli import main
from sa_jobqueue.ops import pausing
from tests.support.models import Job


def _run(database_url, *args):
    return CliRunner().invoke(main, list(args), env={"DATABASE_URL": database_url})


def _paused(engine):
    with Session(engine) as s:
        return sorted(pausing.paused_queues(s, Job))


def test_pause_of_an_unknown_queue_says_so_and_needs_force(committed, database_url):
    with Session(committed) as s, s.begin():
        s.add_all([Job(kind="k", queue="mail"), Job(kind="k", queue="pdf", status="done")])
    refused = _run(database_url, "pause", "nosuchqueue")
    assert refused.exit_code == 2, refused.output
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert "queue 'nosuchqueue' has no job" in lines[0]
    assert "known queues: default, mail, pdf" in lines[0]  # default: where enqueue puts jobs
    assert "--force" in lines[0]
    assert _paused(committed) == []
    # A queue in use pauses as before; --force pauses a queue before its first job.
    assert _run(database_url, "pause", "mail").exit_code == 0
    forced = _run(database_url, "pause", "nosuchqueue", "--force")
    assert forced.exit_code == 0, forced.output
    assert _paused(committed) == ["mail", "nosuchqueue"]


def test_pause_of_an_app_tasks_queue_with_no_job_yet_needs_no_force(committed, database_url):
    result = _run(database_url, "pause", "mail", "--app", "tests.support.apps.lesson:jobs")
    assert result.exit_code == 2  # the lesson's tasks all use the default queue
    ok = _run(database_url, "pause", "default", "--app", "tests.support.apps.lesson:jobs")
    assert ok.exit_code == 0, ok.output
    assert _paused(committed) == ["default"]
