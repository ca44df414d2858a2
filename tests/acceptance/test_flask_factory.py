"""A real ``flask jobs worker`` process of an app factory (issue 41, item 2).

The worker is started the way a Flask user starts one, ``flask --app
"pkg:create_app()" jobs worker``: its database and config come from the app
(``FLASK_*`` variables here), never from ``DATABASE_URL``, and its handler uses
``current_app`` and ``db.session`` (tests/support/apps/flask_factory.py).
"""

from __future__ import annotations

import os
import signal
import sys

import pytest
from sqlalchemy import select

from sa_jobqueue.testing import scratch_database
from sa_jobqueue.testing.database import prepare_database
from tests.support.apps.flask_factory import Base, Export, FlaskJob, create_app, db
from tests.support.processes import Proc

pytestmark = pytest.mark.slow

APP = "tests.support.apps.flask_factory:create_app()"


def test_flask_jobs_worker_runs_a_job_with_current_app_and_db_session(server_url, tmp_path):
    with scratch_database(server_url, prefix="sajq_flask_worker") as url:
        prepare_database(url, tables=[Base.metadata.tables["exports"]])
        app = create_app({"SQLALCHEMY_DATABASE_URI": url})
        assert app.test_client().post("/exports/ada").status_code == 202
        env = {
            **os.environ,
            "FLASK_SQLALCHEMY_DATABASE_URI": url,
            "FLASK_EXPORTER": "worker process",
            # Not the app's database: `flask jobs` must not read it.
            "DATABASE_URL": "postgresql+psycopg://nobody@127.0.0.1:9/nowhere",
        }
        args = [sys.executable, "-m", "flask", "--app", APP, "jobs", "worker", "--queue", "exports"]
        worker = Proc(args, env, tmp_path / "flask-worker.log")
        try:
            worker.wait_for_log("export_posts attempt 1 done", 60)
            worker.signal(signal.SIGTERM)
            assert worker.wait(60) == 0, worker.output()
        finally:
            worker.stop()
        output = worker.output()
        assert "Working outside of application context" not in output
        with app.app_context():
            assert db.session.execute(select(Export.user, Export.made_by)).all() == [
                ("ada", "worker process")
            ]
            status, result = db.session.execute(select(FlaskJob.status, FlaskJob.result)).one()
            assert status == "done"
            assert result["made_by"] == "worker process"
            db.engine.dispose()
