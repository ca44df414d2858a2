"""The archiver moves finished jobs, whole, into partitions it makes; retention drops them."""

from __future__ import annotations

import itertools
import threading
from datetime import timedelta
from typing import cast

import pytest
from sqlalchemy import Column, Engine, ForeignKey, Integer, String, Table, select, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from sa_jobqueue import ConfigurationError, JobMixin
from sa_jobqueue.ops.archive import Archiver, archive_now, partitions
from sa_jobqueue.schema.archive import archive_table_for
from tests.integration.archive.conftest import drop_partitions
from tests.support.archive import add_job, clock, counts, partition_of
from tests.support.helpers import wait_for
from tests.support.models import Job, new_queue
from tests.support.processes import on_databases

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
#: The archive's guarantees hold on every database with partitions.
with_partitions = on_databases("postgresql", "mariadb")


@with_partitions
def test_finished_jobs_older_than_archive_after_move_with_their_steps_and_history(archived):
    with archived.begin() as connection:
        old = {
            status: add_job(connection, status, 2 * HOUR, result='{"r": 1}')
            for status in ("done", "failed", "cancelled")
        }
        recent = add_job(connection, "done", timedelta(minutes=5))
        pending = add_job(connection, "pending", None)
        running = add_job(connection, "running", None)
        connection.execute(
            text(
                "INSERT INTO sa_jobqueue_steps_jobs (job_id, name, kind, result, attempt)"
                " VALUES (:id, 'charge', 'step', '{\"paid\": 3}', 1)"
            ),
            {"id": old["done"]},
        )
        connection.execute(
            text(
                "INSERT INTO sa_jobqueue_errors_jobs (job_id, id, attempt, worker, error)"
                " VALUES (:id, 1, 1, 'w1', 'boom')"
            ),
            {"id": old["failed"]},
        )

    with archived.connect() as connection:
        assert archive_now(connection, Job, after=HOUR) == 3

    with archived.connect() as connection:
        assert counts(connection) == (3, 3)
        live = set(connection.execute(text("SELECT id FROM jobs")).scalars())
        assert live == {recent, pending, running}
        rows = {
            row.id: row
            for row in connection.execute(
                text("SELECT id, status, result, steps, errors, columns FROM jobs_archive")
            )
        }
        if connection.dialect.name != "postgresql":  # JSON read back as text
            rows = {k: _decoded(row) for k, row in rows.items()}
        assert {row.status for row in rows.values()} == {"done", "failed", "cancelled"}
        assert rows[old["done"]].result == {"r": 1}
        assert rows[old["done"]].steps[0]["name"] == "charge"
        assert rows[old["done"]].steps[0]["result"] == {"paid": 3}
        assert rows[old["failed"]].errors[0]["error"] == "boom"
        assert rows[old["cancelled"]].steps is None
        assert rows[old["cancelled"]].columns is None  # the test model has no column of its own
        # The cascade took the moved jobs' steps and history out of the live tables.
        assert connection.execute(text("SELECT count(*) FROM sa_jobqueue_steps_jobs")).scalar() == 0
        assert (
            connection.execute(text("SELECT count(*) FROM sa_jobqueue_errors_jobs")).scalar() == 0
        )


def _decoded(row):
    import json
    from types import SimpleNamespace

    values = row._asdict()
    for name in ("result", "steps", "errors", "columns"):
        if isinstance(values[name], str):
            values[name] = json.loads(values[name])
    return SimpleNamespace(**values)


@with_partitions
def test_a_move_whose_finished_at_crosses_midnight_lands_in_two_day_partitions(archived):
    with archived.begin() as connection:
        now = clock(connection)
        yesterday = now.replace(hour=0, minute=0, second=0, microsecond=0) - DAY
        before = add_job(connection, "done", yesterday - timedelta(seconds=1))
        after = add_job(connection, "done", yesterday + timedelta(seconds=1))
    with archived.connect() as connection:
        assert archive_now(connection, Job, after=HOUR) == 2
        homes = {job: partition_of(connection, job) for job in (before, after)}
        made = partitions(connection, Job)
    assert homes[before] != homes[after]
    days = {p.name: (p.high - p.low) for p in made}
    assert days[homes[after]] == DAY
    # MariaDB's first partition holds all below its bound (`before`'s day is the first).
    assert days[homes[before]] == DAY or made[0].name == homes[before]


@with_partitions
def test_partitions_are_made_ahead_of_now(archived):
    with archived.connect() as connection:
        assert archive_now(connection, Job, after=HOUR) == 0
        made = partitions(connection, Job)
        now = clock(connection)
    assert len(made) == 3
    assert made[0].low <= now < made[0].high
    assert made[-1].high >= now + timedelta(days=2)


@with_partitions
def test_a_job_still_awaited_by_a_waiting_job_stays_until_its_dependent_ends(archived):
    jobs = new_queue()
    from sqlalchemy.orm import Session

    with Session(archived) as session, session.begin():
        upstream = jobs.enqueue(session, "a", {})
        other = jobs.enqueue(session, "b", {})
        waiting = jobs.enqueue(session, "c", {}, after=[upstream, other])
        ids = upstream.id, other.id, waiting.id
    with archived.begin() as connection:
        # `upstream` ended (its end counted by `waiting`) two hours ago; `other` has not.
        connection.execute(
            text(
                "UPDATE jobs SET status = 'done', finished_at = :at,"
                " result = '{\"x\": 1}' WHERE id = :id"
            ),
            {"id": ids[0], "at": _naive(clock(connection) - 2 * HOUR)},
        )
        connection.execute(text("UPDATE jobs SET waiting_for = 1 WHERE id = :id"), {"id": ids[2]})
    with archived.connect() as connection:
        assert archive_now(connection, Job, after=HOUR) == 0  # ctx.upstream still reads it
        connection.execute(
            text("UPDATE jobs SET status = 'cancelled', finished_at = :at WHERE id <> :id"),
            {"id": ids[0], "at": _naive(clock(connection) - 2 * HOUR)},
        )
        connection.commit()
        assert archive_now(connection, Job, after=HOUR) == 3


def _naive(instant):
    from datetime import UTC

    return instant.astimezone(UTC).replace(tzinfo=None)


@with_partitions
def test_retention_drops_a_partition_while_a_dashboard_query_reads_the_archive(archived, database):
    with archived.begin() as connection:
        for days in (40, 39, 1):
            add_job(connection, "done", days * DAY)
    with archived.connect() as connection:
        assert archive_now(connection, Job, after=HOUR) == 3
    archiver = Archiver(Job, HOUR, retention=timedelta(days=30))

    reader = archived.connect()
    reading = reader.begin()
    dropped: list[object] = []
    thread = threading.Thread(target=lambda: dropped.extend(_expire(archived, archiver)))
    try:
        assert reader.execute(text("SELECT count(*) FROM jobs_archive")).scalar_one() == 3
        thread.start()
        # The drop waits for the reader's transaction instead of breaking its reads
        # (PostgreSQL: a read started meanwhile no longer sees the partition being
        # detached; MariaDB: the reader's metadata lock holds the DROP PARTITION off).
        wait_for(lambda: _waiting_drop(archived), what="the drop to wait for the reader")
        again = reader.execute(text("SELECT count(*) FROM jobs_archive")).scalar_one()
        assert 1 <= again <= 3
        assert not dropped
    finally:
        reading.commit()
        reader.close()
        thread.join(60)
    assert not thread.is_alive()
    # MariaDB's ranges follow each other: the empty days between are partitions too.
    assert len(dropped) == 2 if database == "postgresql" else len(dropped) >= 2
    with archived.connect() as connection:
        assert counts(connection) == (0, 1)
        names = {p.name for p in partitions(connection, Job)}
        assert not names & set(dropped)
        if connection.dialect.name == "postgresql":
            for name in dropped:
                found = connection.execute(text("SELECT to_regclass(:n)"), {"n": name})
                assert found.scalar() is None


def _expire(engine: Engine, archiver: Archiver) -> list[str]:
    with engine.connect() as connection:
        return archiver.expire(connection)


def _waiting_drop(engine: Engine) -> bool:
    with engine.connect() as connection:
        if connection.dialect.name != "postgresql":
            return bool(
                connection.execute(
                    text(
                        "SELECT count(*) FROM information_schema.PROCESSLIST"
                        " WHERE INFO LIKE '%DROP PARTITION%' AND DB = DATABASE()"
                        " AND STATE LIKE 'Waiting for table metadata lock%'"
                    )
                ).scalar()
            )
        return bool(
            connection.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%DETACH PARTITION%'"
                    " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
                    " AND datname = current_database()"
                )
            ).scalar()
        )


class AppBase(DeclarativeBase):
    pass


Table("orders", AppBase.metadata, Column("id", Integer, primary_key=True))


class AppJob(JobMixin, AppBase):
    __tablename__ = "app_jobs"

    order_id: Mapped[int | None] = mapped_column(ForeignKey("orders.id"))
    note: Mapped[str | None] = mapped_column(String(100))


@with_partitions
def test_the_apps_own_columns_travel_without_its_foreign_keys(committed):
    tables = [t for t in AppBase.metadata.sorted_tables if t.name != "orders"]
    AppBase.metadata.create_all(committed, tables=tables)
    try:
        with committed.begin() as connection:
            connection.execute(
                text("INSERT INTO orders (id, customer, total_cents) VALUES (7, 'd', 1)")
            )
            add_job(connection, "done", 2 * HOUR, table="app_jobs")
            connection.execute(text("UPDATE app_jobs SET order_id = 7, note = 'hi'"))
        with committed.connect() as connection:
            assert archive_now(connection, AppJob, after=HOUR) == 1
            columns = connection.execute(
                select(archive_table_for(cast(Table, AppJob.__table__)).c.columns)
            ).scalar_one()
            assert columns == {"order_id": 7, "note": "hi"}
            # The order can go: the archive keeps its id, not a reference to it.
            connection.execute(text("DELETE FROM orders WHERE id = 7"))
            connection.commit()
    finally:
        drop_partitions(committed, AppJob)
        AppBase.metadata.drop_all(committed, tables=tables)


@on_databases("sqlite")
def test_archive_after_is_refused_where_the_database_has_no_partitions(committed):
    jobs = new_queue()
    with pytest.raises(ConfigurationError, match="archive_after needs partitions"):
        jobs.worker(committed, archive_after=HOUR)


def test_bad_archive_options_are_refused_at_the_worker_call(committed):
    jobs = new_queue()
    with pytest.raises(ConfigurationError, match="archive_retention goes with archive_after"):
        jobs.worker(committed, archive_retention=HOUR)
    with pytest.raises(ConfigurationError, match="archive_partition must be whole minutes"):
        jobs.worker(committed, archive_after=HOUR, archive_partition=timedelta(seconds=30))
    with pytest.raises(ConfigurationError, match="archive_after"):
        jobs.worker(committed, archive_after=timedelta(seconds=-1))


def test_worker_archive_after_on_sqlite_fails_in_one_line(tmp_path):
    from click.testing import CliRunner

    from sa_jobqueue.cli import main

    url = f"sqlite:///{tmp_path / 'app.db'}"
    args = ["worker", "tests.support.apps.flow:jobs", "--database-url", url]
    result = CliRunner().invoke(main, [*args, "--archive-after", "1h"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "archive_after needs partitions (PostgreSQL, MariaDB)" in lines[0]
    bad = CliRunner().invoke(main, [*args, "--archive-after", "1M"])
    assert bad.exit_code == 2
    assert "--archive-after" in bad.stderr


def test_autogenerate_with_include_object_leaves_the_partitions_alone(archived):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from sa_jobqueue.migration import include_object
    from tests.support.models import Base

    with archived.connect() as connection:
        archive_now(connection, Job, after=HOUR)
        assert partitions(connection, Job)
        context = MigrationContext.configure(connection, opts={"include_object": include_object})
        found = compare_metadata(context, Base.metadata)
    assert not [d for d in found if "_archive_" in repr(d)]


def test_a_missing_archive_table_is_said_once_and_archives_nothing(archived, caplog):
    from sa_jobqueue.ops.admin import model_for_table

    model = model_for_table("jobs")
    archiver = Archiver(model, HOUR)
    with archived.begin() as connection:
        connection.execute(text("ALTER TABLE jobs_archive RENAME TO jobs_archive_away"))
    try:
        with archived.connect() as connection:
            assert archiver.maybe_run(connection, budget=1.0) == 0
            archiver._next = 0.0
            assert archiver.maybe_run(connection, budget=1.0) == 0
    finally:
        with archived.begin() as connection:
            connection.execute(text("ALTER TABLE jobs_archive_away RENAME TO jobs_archive"))
    said = [r for r in caplog.records if "does not exist (revision sajq_0011)" in r.getMessage()]
    assert len(said) == 1


@with_partitions
def test_a_maintenance_round_moves_then_drops_what_is_past_the_retention(archived):
    with archived.begin() as connection:
        for days in (40, 1):
            add_job(connection, "done", days * DAY)
    archiver = Archiver(Job, HOUR, retention=timedelta(days=30))
    with archived.connect() as connection:
        assert archiver.maybe_run(connection, budget=30.0) == 2
        assert counts(connection) == (0, 1)  # the 40-day-old job left with its partition
        now = clock(connection)
        assert all(p.high > now - timedelta(days=30) for p in partitions(connection, Job))


@on_databases("mariadb")
def test_where_ranges_follow_each_other_a_backlog_gets_a_partition_a_day_up_to_a_bound(archived):
    with archived.begin() as connection:
        for days in (600, 3, 2):
            add_job(connection, "done", days * DAY)
    with archived.connect() as connection:
        assert archive_now(connection, Job, after=HOUR) == 3
        made = partitions(connection, Job)
        now = clock(connection)
    # The first run starts at the oldest job's day (the first partition, holding all
    # below it); the ranges follow each other, so the 600 days up to today are filled:
    # at most 400 partitions in one go (the oldest spanning the rest), then two ahead.
    assert len(made) == 1 + 400 + 2
    assert all(a.high == b.low for a, b in itertools.pairwise(made))
    assert made[1].high - made[1].low > 100 * DAY
    assert {p.high - p.low for p in made[2:]} == {DAY}
    assert made[-1].high >= now + 2 * DAY
