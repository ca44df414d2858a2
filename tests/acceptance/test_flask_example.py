"""examples/flask_app.py: a lease-mode handler uses Flask-SQLAlchemy's db.session."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from sqlalchemy import select

from sa_jobqueue import JobContext
from sa_jobqueue.testing import scratch_database

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flask_app.py"


def _load(monkeypatch: pytest.MonkeyPatch, url: str) -> ModuleType:
    monkeypatch.setenv("DATABASE_URL", url)
    spec = importlib.util.spec_from_file_location("examples_flask_app", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_the_handler_uses_db_session_through_the_app_context_middleware(
    server_url, monkeypatch, capsys
):
    with scratch_database(server_url, prefix="sa_jobqueue_flask") as url:
        app = _load(monkeypatch, url)
        rows = app.main()
        assert [(email, status) for email, status, _ in rows] == [
            ("ada@example.com", "done"),
            ("alan@example.com", "done"),
        ]
        assert [result for _, _, result in rows] == [
            {"welcomed": "ada@example.com", "attempt": 1},
            {"welcomed": "alan@example.com", "attempt": 1},
        ]
        with app.app.app_context():
            welcomed = app.db.session.scalars(select(app.Signup.welcomed_at)).all()
            assert len(welcomed) == 2
            assert None not in welcomed
        # Without the middleware's app context, the same handler cannot reach db.session.
        ctx = JobContext(
            id=1,
            kind="send_welcome",
            queue="mail",
            payload={"signup_id": 1},
            attempt=1,
            idempotency_key="jobs:1",
        )
        with pytest.raises(RuntimeError, match="Working outside of application context"):
            app.send_welcome(ctx)
        with app.app.app_context():
            app.db.engine.dispose()  # so the scratch database can be dropped
    assert "ran 2 jobs" in capsys.readouterr().out


@pytest.mark.slow
def test_the_example_runs_as_a_script(server_url, tmp_path):
    with scratch_database(server_url, prefix="sa_jobqueue_flask_script") as url:
        done = subprocess.run(
            [sys.executable, str(EXAMPLE)],
            cwd=tmp_path,
            env={**os.environ, "DATABASE_URL": url},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert "ran 2 jobs" in done.stdout
    lines = done.stdout.splitlines()
    assert lines[1].split()[:2] == ["ada@example.com", "done"]
    assert "'welcomed': 'ada@example.com'" in lines[1]
