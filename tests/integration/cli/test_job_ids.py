"""A job id beyond bigint is a usage error in the CLI (exit 2, one line) and a 404 in the
dashboard, never a database error."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.testclient import TestClient

from sa_jobqueue import ConfigurationError, JobQueue, ValidationError
from sa_jobqueue.cli import main
from sa_jobqueue.dashboard import make_app
from tests.support.models import Job

HUGE = "99999999999999999999999"


@pytest.mark.parametrize(
    "command",
    [
        ["cancel", HUGE],
        ["retry", HUGE],
        ["jobs", "show", HUGE],
        ["cancel", "1", HUGE],
        ["jobs", "rerun", HUGE, "--from-step", "a"],
    ],
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


@pytest.mark.parametrize(
    "command",
    [
        ["jobs", "list", "--limit", "99999999999"],
        ["cancel", "--all", "--batch-size", "99999999999"],
        ["retry", "--all", "--dry-run", "--batch-size", "3000000000"],
        ["prune", "--dry-run", "--batch-size", "99999999999"],
        ["enqueue", "k", "--priority", "40000"],
        ["enqueue", "k", "--max-attempts", "99999999999"],
        ["jobs", "list", "--limit", "\u0665"],  # ARABIC-INDIC DIGIT FIVE
        ["jobs", "list", "--limit", "1_0"],
    ],
)
def test_cli_count_out_of_range_or_not_ascii_is_a_usage_error_not_a_database_error(
    committed, database_url, command
):
    result = CliRunner().invoke(main, command, env={"DATABASE_URL": database_url})
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("sa-jobqueue: ")
    assert command[-1] in lines[0]
    assert "database error" not in lines[0]


@pytest.mark.parametrize("command", ["cancel", "retry", "show"])
def test_cli_job_id_in_other_scripts_digits_is_not_read_as_that_job(
    committed, database_url, command
):
    jobs = JobQueue(Job)
    with Session(committed) as s, s.begin():
        job_id = jobs.enqueue(s, "k").id
    arabic = str(job_id).translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    args = ["jobs", "show", arabic] if command == "show" else [command, arabic]
    result = CliRunner().invoke(main, args, env={"DATABASE_URL": database_url})
    assert result.exit_code == 2, result.output
    assert f"{arabic!r} is not a job id (ASCII digits" in result.stderr
    with Session(committed) as s:
        assert s.scalar(select(Job.status).where(Job.id == job_id)) == "pending"


def test_dashboard_job_id_in_other_scripts_digits_is_not_a_job(committed):
    jobs = JobQueue(Job)
    with Session(committed) as s, s.begin():
        job_id = jobs.enqueue(s, "k").id
    arabic = str(job_id).translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    client = TestClient(make_app(jobs, committed, allow_actions=True))
    assert client.get(f"/lookup?id={arabic}").status_code == 400
    assert client.get("/lookup?id=²").status_code == 400  # isdigit(), but int() refuses it


def test_operator_api_limit_beyond_integer_is_a_configuration_error(committed):
    jobs = JobQueue(Job)
    with Session(committed) as s, pytest.raises(ConfigurationError, match="up to 2147483647"):
        jobs.list_jobs(s, limit=99999999999)
