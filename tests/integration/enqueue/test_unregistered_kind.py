"""An enqueue of a kind whose task this process never registered says so (issue 41, item 3).

A web process that never imported the tasks module (RQ's habit) wrote the job with the
default queue and max_attempts, not its task's, silently. It now logs one warning per
kind naming what the job took and how to fix it; a kind with its task registered, or an
enqueue that gives queue and max_attempts itself, logs nothing.
"""

from __future__ import annotations

import logging

from tests.support.models import new_queue

LOGGER = "sa_jobqueue.enqueue"


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_an_unregistered_kind_is_named_once_with_the_defaults_it_took(session, caplog):
    jobs = new_queue()
    caplog.set_level(logging.WARNING, logger=LOGGER)
    first = jobs.enqueue(session, "export_posts", {"user_id": 1})
    jobs.enqueue(session, "export_posts", {"user_id": 2})
    jobs.enqueue_many(session, [("export_posts", {"user_id": 3})])
    (line,) = warnings_of(caplog)
    assert (first.queue, first.max_attempts) == ("default", 20)
    assert "'export_posts'" in line
    assert "no task registered in this process" in line
    assert "queue 'default' and max_attempts 20" in line
    assert "import the module that defines its task" in line
    jobs.enqueue(session, "send_digest")  # another kind: its own line
    assert len(warnings_of(caplog)) == 2


def test_a_registered_kind_or_explicit_options_log_nothing(session, caplog):
    jobs = new_queue()
    jobs.task("export_posts", queue="exports", max_attempts=3)(lambda ctx: None)
    caplog.set_level(logging.WARNING, logger=LOGGER)
    job = jobs.enqueue(session, "export_posts", {"user_id": 1})
    assert (job.queue, job.max_attempts) == ("exports", 3)
    jobs.enqueue(session, "elsewhere", queue="reports", max_attempts=5)  # a producer's kind
    jobs.enqueue_many(session, [{"kind": "elsewhere", "queue": "reports", "max_attempts": 5}])
    assert warnings_of(caplog) == []
