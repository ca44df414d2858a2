"""create_all, migrate and the schema, as broken on purpose in issue 11.

create_all makes what the migration makes; migrate over an existing table says
how to adopt it; concurrent migrates all succeed; names that cannot fit are
refused; a downgrade does not drop live jobs without --force; a database that is
not UTF8 is refused.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.orm import DeclarativeBase, Session
from sqlalchemy.pool import NullPool

from sa_jobqueue import ConfigurationError, JobMixin, JobQueue, migration
from sa_jobqueue.testing import scratch_database
from tests.support.models import Job


class DeclaredBase(DeclarativeBase):
    pass


class DeclaredJob(JobMixin, DeclaredBase):
    """A table made by create_all, beside the migrated ``jobs``."""

    __tablename__ = "declared_jobs"


@pytest.fixture
def scratch(server_url: str) -> Iterator[tuple[str, Engine]]:
    with scratch_database(server_url, prefix="sa_jobqueue_hardening") as url:
        engine = create_engine(url, poolclass=NullPool)
        try:
            yield url, engine
        finally:
            engine.dispose()


def sa_jobqueue(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "sa_jobqueue.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def one_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def beside_the_table(connection: Connection, table: str) -> dict[str, Any]:
    """The trigger, its function and the storage options of `table`, with its name as T."""
    trigger = connection.scalar(
        text(
            "SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t"
            " WHERE t.tgrelid = to_regclass(:t) AND NOT t.tgisinternal"
            " AND t.tgname = 'sa_jobqueue_notify'"  # not the counters' (sajq_0012)
        ),
        {"t": table},
    )
    function = connection.scalar(
        text("SELECT pg_get_functiondef(to_regprocedure(:f))"),
        {"f": f"sa_jobqueue_notify_{table}()"},
    )
    options = connection.scalar(
        text("SELECT reloptions FROM pg_class WHERE oid = to_regclass(:t)"), {"t": table}
    )
    return {
        "trigger": (trigger or "").replace(table, "T"),
        "function": (function or "").replace(table, "T"),
        "options": sorted(options or []),
    }


# -- 9 --------------------------------------------------------------------------------


def test_create_all_makes_the_same_trigger_and_settings_as_the_migration(scratch):
    url, engine = scratch
    migration.upgrade(url)
    DeclaredBase.metadata.create_all(engine)
    with engine.connect() as connection:
        migrated = beside_the_table(connection, "jobs")
        declared = beside_the_table(connection, "declared_jobs")
    assert migrated["trigger"].startswith("CREATE TRIGGER sa_jobqueue_notify AFTER INSERT ON")
    assert "pg_notify" in migrated["function"]
    assert migrated["options"] == sorted(f"{k}={v}" for k, v in migration.AUTOVACUUM.items())
    assert declared == migrated


def test_create_all_wakes_a_listener_on_enqueue(scratch):
    _, engine = scratch
    DeclaredBase.metadata.create_all(engine)
    listener = engine.connect()
    try:
        raw: Any = listener.connection.driver_connection
        raw.autocommit = True
        raw.execute('LISTEN "sa_jobqueue_declared_jobs"')
        with Session(engine) as session, session.begin():
            JobQueue(DeclaredJob).enqueue(session, "k", {}, queue="mail")
        heard = [n.payload for n in raw.notifies(timeout=5, stop_after=1)]
    finally:
        listener.close()
    assert heard == ["mail"]


def test_drop_all_removes_the_trigger_function(scratch):
    _, engine = scratch
    DeclaredBase.metadata.create_all(engine)
    DeclaredBase.metadata.drop_all(engine)
    with engine.connect() as connection:
        left = connection.scalar(text("SELECT to_regproc('sa_jobqueue_notify_declared_jobs')"))
    assert left is None


# -- 10 -------------------------------------------------------------------------------


def test_migrate_over_a_create_all_table_says_adopt_in_one_line_then_adopts(scratch):
    url, engine = scratch
    Job.metadata.create_all(engine, tables=[Job.metadata.tables["jobs"]])  # as create_all would
    line = one_line(sa_jobqueue(url, "migrate"), 2)
    assert "table 'jobs' exists, but sa-jobqueue migrate did not make it" in line
    assert "sa-jobqueue migrate --adopt --table jobs" in line
    done = sa_jobqueue(url, "migrate", "--adopt")
    assert done.returncode == 0, done.stderr
    # Stamped at the root revision, then upgraded to the head like any table.
    (head,) = migration.latest()
    assert done.stdout.strip() == f"adopted table jobs at {head}"
    with engine.connect() as connection:
        version = connection.scalar(text("SELECT version_num FROM sa_jobqueue_version_jobs"))
    assert version == head


def test_adopt_completes_a_hand_made_table_with_the_right_columns(scratch):
    url, engine = scratch
    Job.metadata.create_all(engine, tables=[Job.metadata.tables["jobs"]])
    with engine.begin() as connection:
        connection.execute(text("DROP FUNCTION sa_jobqueue_notify_jobs() CASCADE"))
        connection.execute(text("DROP INDEX ix_jobs_pending, ix_jobs_running, ix_jobs_finished"))
        connection.execute(text("ALTER TABLE jobs DROP CONSTRAINT ck_jobs_status"))
        connection.execute(text("ALTER TABLE jobs RESET (autovacuum_vacuum_threshold)"))
    migration.upgrade(url, adopt=True)
    DeclaredBase.metadata.create_all(engine)
    with engine.connect() as connection:
        assert beside_the_table(connection, "jobs") == beside_the_table(connection, "declared_jobs")
        indexes = set(
            connection.scalars(text("SELECT indexname FROM pg_indexes WHERE tablename = 'jobs'"))
        )
        constraints = set(
            connection.scalars(
                text("SELECT conname FROM pg_constraint WHERE conrelid = 'jobs'::regclass")
            )
        )
    assert {"ix_jobs_pending", "ix_jobs_running", "ix_jobs_finished"} <= indexes
    assert "ck_jobs_status" in constraints


def test_adopt_refuses_a_table_of_another_shape_naming_the_columns(scratch):
    url, engine = scratch
    with engine.begin() as connection:
        connection.execute(
            text(
                "CREATE TABLE jobs (id bigint PRIMARY KEY, kind text, payload text,"
                " extra int NOT NULL)"
            )
        )
    line = one_line(sa_jobqueue(url, "migrate", "--adopt"), 2)
    assert "does not match the model, so it cannot be adopted" in line
    assert "column queue (text) is missing" in line
    assert "column payload is text, not jsonb" in line
    assert "column extra (integer) is NOT NULL without a default" in line
    with engine.connect() as connection:
        assert connection.scalar(text("SELECT to_regclass('sa_jobqueue_version_jobs')")) is None


# -- 11 -------------------------------------------------------------------------------


def test_five_concurrent_migrate_runs_all_succeed(scratch):
    url, engine = scratch
    env = {**os.environ, "DATABASE_URL": url}
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "sa_jobqueue.cli", "migrate"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(5)
    ]
    outcomes = [(run.wait(timeout=120), *run.communicate()) for run in runs]
    assert [code for code, _, _ in outcomes] == [0] * 5, outcomes
    with engine.connect() as connection:
        assert connection.scalar(text("SELECT count(*) FROM sa_jobqueue_version_jobs")) == 1


# -- 12 -------------------------------------------------------------------------------


def test_migrate_refuses_a_table_name_whose_version_table_name_cannot_fit(scratch):
    url, _ = scratch
    line = one_line(sa_jobqueue(url, "migrate", "--table", "t" * 40), 2)
    assert "sa_jobqueue_version_" + "t" * 40 + "_pkc" in line
    assert "over PostgreSQL's 63; use at most 39" in line
    done = sa_jobqueue(url, "migrate", "--table", "t" * 39)
    assert done.returncode == 0, done.stderr


def test_a_model_whose_derived_names_cannot_fit_is_refused_where_it_is_declared():
    class LongBase(DeclarativeBase):
        pass

    with pytest.raises(ConfigurationError, match="use at most 44"):
        type("LongJob", (JobMixin, LongBase), {"__tablename__": "t" * 45})


# -- 13 -------------------------------------------------------------------------------


def test_migrate_revision_base_downgrades_and_says_so(scratch):
    url, engine = scratch
    assert sa_jobqueue(url, "migrate").returncode == 0
    done = sa_jobqueue(url, "migrate", "--revision", "base")
    assert done.returncode == 0, done.stderr
    assert "latest" not in done.stdout
    assert done.stdout.strip() == "downgraded table jobs to base (the table is dropped)"
    with engine.connect() as connection:
        assert connection.scalar(text("SELECT to_regclass('jobs')")) is None


def test_downgrading_away_live_jobs_needs_force(scratch):
    url, engine = scratch
    migration.upgrade(url)
    with Session(engine) as session, session.begin():
        JobQueue(Job).enqueue(session, "k", {})
        JobQueue(Job).enqueue(session, "k", {})
        session.execute(text("UPDATE jobs SET status = 'running' WHERE id = 1"))
    line = one_line(sa_jobqueue(url, "migrate", "--revision", "base"), 2)
    assert "table 'jobs' holds 1 pending and 1 running jobs" in line
    assert "--force" in line
    with pytest.raises(ConfigurationError, match="force=True"):
        migration.downgrade(url)
    with engine.connect() as connection:
        assert connection.scalar(text("SELECT count(*) FROM jobs")) == 2
    done = sa_jobqueue(url, "migrate", "--revision", "base", "--force")
    assert done.returncode == 0, done.stderr
    with engine.connect() as connection:
        assert connection.scalar(text("SELECT to_regclass('jobs')")) is None


def test_python_downgrade_with_force_drops_live_jobs(scratch):
    url, engine = scratch
    migration.upgrade(url)
    with Session(engine) as session, session.begin():
        JobQueue(Job).enqueue(session, "k", {})
    assert migration.downgrade(url, force=True) == ()
    with engine.connect() as connection:
        assert connection.scalar(text("SELECT to_regclass('jobs')")) is None


# -- 14 -------------------------------------------------------------------------------


def test_migrate_refuses_a_database_that_is_not_utf8(server_url):
    with scratch_database(server_url, prefix="sa_jobqueue_latin1", encoding="LATIN1") as url:
        line = one_line(sa_jobqueue(url, "migrate"), 2)
        assert "is encoded in LATIN1, and sa_jobqueue needs UTF8" in line
        engine = create_engine(url, poolclass=NullPool)
        with engine.connect() as connection:
            assert connection.scalar(text("SELECT to_regclass('jobs')")) is None
        engine.dispose()


def test_adopt_on_a_migrated_table_adds_back_a_dropped_trigger(scratch):
    url, engine = scratch
    migration.upgrade(url)
    with engine.begin() as connection:
        connection.execute(text("DROP TRIGGER sa_jobqueue_notify ON jobs"))
    assert migration.upgrade(url) == migration.latest()
    with engine.connect() as connection:
        assert beside_the_table(connection, "jobs")["trigger"] == ""
    migration.upgrade(url, adopt=True)
    with engine.connect() as connection:
        assert beside_the_table(connection, "jobs")["trigger"].startswith("CREATE TRIGGER")
