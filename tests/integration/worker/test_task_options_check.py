"""A worker says once per kind that a claimed job took the defaults, not its task's options.

A producer that never imported the task's module wrote the job with queue ``default``
and max_attempts 20 (it warns itself, tests/integration/enqueue/test_unregistered_kind.py);
the worker, which has the task, names the kind, what differs and the likely cause, once
(issue 41, item 3, worker half). A value given to ``enqueue`` on purpose is not reported.
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from tests.support.models import new_queue

LOGGER = "sa_jobqueue.worker"


def _warnings(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == LOGGER
        and r.levelno == logging.WARNING
        and "stored with the defaults" in r.getMessage()
    ]


def _worker_queue():
    jobs = new_queue()
    jobs.task("export_posts", queue="exports", max_attempts=3)(lambda ctx: None)
    jobs.task("send_digest", queue="mail")(lambda ctx: None)
    jobs.task("plain")(lambda ctx: None)  # the defaults: nothing a row could contradict
    return jobs


def test_a_job_a_producer_without_the_task_wrote_is_named_once_per_kind(committed, caplog):
    producer = new_queue()  # the web process: it never imported the tasks module
    with Session(committed) as session, session.begin():
        for user in (1, 2):
            producer.enqueue(session, "export_posts", {"user": user})
        producer.enqueue(session, "send_digest", max_attempts=5)
        producer.enqueue(session, "plain")
    caplog.set_level(logging.WARNING, logger=LOGGER)
    assert _worker_queue().worker(committed).drain() == 4
    export, digest = sorted(_warnings(caplog))
    assert "kind 'export_posts'" in export
    assert "queue 'default' (its task: 'exports')" in export
    assert "max_attempts 20 (its task: 3)" in export
    assert "did not import the module that defines its task" in export
    assert "kind 'send_digest'" in digest
    assert "queue 'default' (its task: 'mail')" in digest
    assert "max_attempts" not in digest.split(":")[0]  # given on purpose: not reported


def test_jobs_with_their_tasks_options_or_chosen_ones_are_not_reported(committed, caplog):
    producer = _worker_queue()  # has the tasks
    with Session(committed) as session, session.begin():
        producer.enqueue(session, "export_posts", {"user": 1})
        producer.enqueue(session, "export_posts", queue="urgent", max_attempts=7)
        producer.enqueue(session, "send_digest", max_attempts=20)  # the default, chosen
    caplog.set_level(logging.WARNING, logger=LOGGER)
    worker = _worker_queue().worker(committed, queues=["exports", "urgent", "mail"])
    assert worker.drain() == 3
    assert _warnings(caplog) == []
