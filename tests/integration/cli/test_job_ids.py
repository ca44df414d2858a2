"""A job id beyond bigint is a usage error in the CLI (exit 2, one line) and a 404 in the
dashboard, never a database error."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from sqlalchemy.orm import Session
from starlette.testclient import TestClient

from sa_jobqueue import JobQueue, ValidationError
from sa_jobqueue.cli import main
from sa_jobqueue.dashboard import make_app
from tests.support.models import Job

HUGE = "99999999999999999999999"


@pytest.mark.parametrize(
    "command", [["cancel", HUGE], ["retry", HUGE], ["jobs", "show", HUGE], ["cancel", "1", HUGE]]
)
def test_cli_job_id_beyond_bigint_is_a_one_line_usage_error(committed, database_url, command):
    result = CliRunner().invoke(main, command, env={"DATABASE_URL": database_url})
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("sa-jobqueue: ")
    assert HUGE in lines[0]
    assert "database error" not in lines[0]


def test_dashboard_job_id_beyond_bigint_is_not_found(committed):
    client = TestClient(make_app(JobQueue(Job), committed, allow_actions=True))
    page = client.get(f"/jobs/{HUGE}")
    assert page.status_code == 404
    assert f"There is no job {HUGE}" in page.text


def test_operator_api_job_id_beyond_bigint_is_a_validation_error(committed):
    jobs = JobQueue(Job)
    with Session(committed) as s, pytest.raises(ValidationError, match="bigint"):
        jobs.cancel(s, [int(HUGE)])
