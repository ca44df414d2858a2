"""What a worker checks when it starts (issue 11): it exits in one line instead of
looping on errors, and warns once when it would work worse than it could."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

from sa_jobqueue import ConfigurationError, JobQueue, migration
from sa_jobqueue.testing import scratch_database
from tests.support.models import Job

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def scratch(server_url: str) -> Iterator[tuple[str, Engine]]:
    with scratch_database(server_url, prefix="sa_jobqueue_start") as url:
        engine = create_engine(url, poolclass=NullPool)
        try:
            yield url, engine
        finally:
            engine.dispose()


def worker_command(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "sa_jobqueue.cli",
            "worker",
            "tests.support.apps.lesson:jobs",
            *extra,
        ],
        env={**os.environ, "DATABASE_URL": url},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def one_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, (done.stdout, done.stderr)
    lines = [line for line in done.stderr.strip().splitlines() if "sa-jobqueue:" in line]
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def test_a_worker_against_a_table_of_the_wrong_shape_exits_with_one_line(scratch):
    url, engine = scratch
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE jobs (id bigint PRIMARY KEY, kind text, payload jsonb)"))
    line = one_line(worker_command(url), 2)
    assert "table 'jobs' does not match Job:" in line
    assert "column queue (text) is missing" in line
    with pytest.raises(ConfigurationError, match="column status"):
        JobQueue(Job).worker(engine).drain()


def test_a_worker_without_its_table_exits_with_one_line_naming_migrate(scratch):
    url, _ = scratch
    line = one_line(worker_command(url), 2)
    assert "table 'jobs' does not exist (run: sa-jobqueue migrate --table jobs)" in line


def test_a_worker_refuses_a_database_that_is_not_utf8(server_url):
    with scratch_database(server_url, prefix="sa_jobqueue_latin1", encoding="LATIN1") as url:
        engine = create_engine(url, poolclass=NullPool)
        Job.metadata.create_all(engine, tables=[Job.metadata.tables["jobs"]])
        line = one_line(worker_command(url), 2)
        assert "is encoded in LATIN1, and sa_jobqueue needs UTF8" in line
        with pytest.raises(ConfigurationError, match="needs UTF8"):
            JobQueue(Job).worker(engine).drain()
        engine.dispose()


def test_a_psycopg2_engine_is_refused_where_it_enters_the_worker(database_url):
    url = database_url.replace("postgresql+psycopg://", "postgresql+psycopg2://")
    engine = create_engine(url)
    with pytest.raises(ConfigurationError, match=r"needs PostgreSQL through psycopg 3"):
        JobQueue(Job).worker(engine)
    engine.dispose()
    line = one_line(worker_command(url), 2)
    assert "postgresql+psycopg://" in line
    assert "postgresql+psycopg2://" in line


def test_a_worker_on_a_table_without_the_trigger_warns_once_with_the_fix(scratch, caplog):
    url, engine = scratch
    migration.upgrade(url)
    with engine.begin() as conn:
        conn.execute(text("DROP TRIGGER sa_jobqueue_notify ON jobs"))
    caplog.set_level(logging.WARNING, logger="sa_jobqueue")
    jobs = JobQueue(Job)
    jobs.worker(engine).drain()
    warnings = [
        r.getMessage() for r in caplog.records if "no sa_jobqueue_notify trigger" in r.getMessage()
    ]
    assert len(warnings) == 1, warnings
    assert "sa-jobqueue migrate --adopt" in warnings[0]
