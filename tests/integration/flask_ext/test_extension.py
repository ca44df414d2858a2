"""`sa_jobqueue.flask.JobQueueExtension` in-process: an app factory, many apps, one session.

Two apps built by one factory, each with its own database and config, share the
module's `JobQueue`: each app's jobs land in its database and run with its config and
its ``db.session`` (issue 41, item 2). The real ``flask jobs worker`` process is in
tests/acceptance/test_flask_factory.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import pytest
from flask import Flask
from sqlalchemy import select

from sa_jobqueue import ConfigurationError
from sa_jobqueue.flask import EXTENSION_KEY, JobQueueExtension
from sa_jobqueue.testing import drain, scratch_database
from sa_jobqueue.testing.database import prepare_database
from tests.support.apps.flask_factory import (
    Base,
    Export,
    FlaskJob,
    create_app,
    db,
    flask_jobs,
    jobs,
)


@dataclass
class Two:
    a: Flask
    b: Flask


@pytest.fixture
def apps(server_url: str) -> Iterator[Two]:
    with ExitStack() as stack:
        made = []
        for name in ("a", "b"):
            url = stack.enter_context(scratch_database(server_url, prefix=f"sajq_flask_{name}"))
            prepare_database(url, tables=[Base.metadata.tables["exports"]])
            made.append(create_app({"SQLALCHEMY_DATABASE_URI": url, "EXPORTER": f"app {name}"}))
        yield Two(*made)
        for app in made:
            with app.app_context():
                db.engine.dispose()  # so its scratch database can be dropped


def _exports(app: Flask) -> list[tuple[str, str | None]]:
    with app.app_context():
        rows = db.session.execute(select(Export.user, Export.made_by).order_by(Export.id))
        return [(user, made_by) for user, made_by in rows]


def _jobs(app: Flask) -> list[tuple[str, str, int, object]]:
    with app.app_context():
        rows = db.session.execute(
            select(FlaskJob.kind, FlaskJob.status, FlaskJob.max_attempts, FlaskJob.result)
        )
        return [tuple(row) for row in rows]


def test_two_apps_of_one_factory_keep_their_databases_and_configs(apps):
    assert apps.a.test_client().post("/exports/ada").status_code == 202
    assert apps.b.test_client().post("/exports/bob").status_code == 202
    # Each worker serves its app: its engine, its context; no app context is active here.
    assert flask_jobs.worker(apps.a, queues=["exports"]).drain() == 1
    assert flask_jobs.worker(apps.b, queues=["exports"]).drain() == 1
    assert _exports(apps.a) == [("ada", "app a")]
    assert _exports(apps.b) == [("bob", "app b")]
    with apps.a.app_context():
        database_a = db.engine.url.database
    ((kind, status, max_attempts, result),) = _jobs(apps.a)
    assert (kind, status, max_attempts) == ("export_posts", "done", 3)
    assert result == {"made_by": "app a", "database": database_a}
    assert apps.a.extensions[EXTENSION_KEY] is flask_jobs


def test_an_async_handler_runs_in_its_apps_context(apps):
    with apps.b.app_context():
        jobs.enqueue(db.session, "export_async")
        db.session.commit()
    assert flask_jobs.worker(apps.b).drain() == 1
    assert _jobs(apps.b) == [("export_async", "done", 20, {"made_by": "app b"})]


def test_a_test_draining_inside_an_app_context_uses_that_app(apps):
    with apps.b.app_context():
        jobs.enqueue(db.session, "export_posts", {"user": "cy"})
        db.session.commit()
        (outcome,) = drain(jobs, db.engine)  # in this thread: the handler sees this context
        assert outcome.ok, outcome
    assert _exports(apps.b) == [("cy", "app b")]
    assert _exports(apps.a) == []


def test_a_worker_that_names_no_app_among_several_fails_the_job_saying_why(apps):
    with apps.a.app_context():
        jobs.enqueue(db.session, "export_posts", {"user": "dee"})
        db.session.commit()
        engine = db.engine
    assert jobs.worker(engine, queues=["exports"]).drain() == 1  # not the extension's worker
    ((_, status, _, _),) = _jobs(apps.a)
    assert status == "pending"  # retried later, as any handler error
    with apps.a.app_context():
        error = db.session.scalars(select(FlaskJob.last_error)).one()
    assert error is not None
    assert "needs a Flask app context" in error
    assert "flask --app APP jobs worker" in error


def test_the_jobs_cli_reads_the_apps_database(apps):
    apps.a.test_client().post("/exports/ada")
    out = apps.a.test_cli_runner().invoke(args=["jobs", "stats", "--json"])
    assert out.exit_code == 0, out.output
    assert '"exports"' in out.output
    out_b = apps.b.test_cli_runner().invoke(args=["jobs", "stats", "--json"])
    assert out_b.exit_code == 0, out_b.output
    assert '"exports"' not in out_b.output
    listed = apps.a.test_cli_runner().invoke(args=["jobs", "--help"])
    assert "worker" in listed.output
    assert "stats" in listed.output


def test_the_worker_command_has_the_options_of_sa_jobqueue_worker_less_the_target(apps):
    out = apps.a.test_cli_runner().invoke(args=["jobs", "worker", "--help"])
    assert out.exit_code == 0, out.output
    for flag in ("--queue", "--concurrency", "--log-level", "--shutdown-timeout", "--listen"):
        assert flag in out.output
    assert "TARGET" not in out.output
    assert "DATABASE_URL" not in out.output  # the app's config chooses the database


def test_no_prepared_statements_without_a_url_says_where_to_set_it(apps):
    out = apps.a.test_cli_runner().invoke(args=["jobs", "stats", "--no-prepared-statements"])
    assert out.exit_code == 2
    assert "applies to --database-url only" in out.output
    assert "SQLALCHEMY_ENGINE_OPTIONS" in out.output


def test_an_app_takes_one_extension():
    app = create_app()
    with pytest.raises(ConfigurationError, match="has a JobQueueExtension already"):
        JobQueueExtension(jobs, app)
