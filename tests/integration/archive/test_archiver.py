"""The archiver moves finished jobs, whole, into partitions it makes; retention drops them."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import Column, Engine, ForeignKey, Integer, Table, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from sa_jobqueue import ConfigurationError, JobMixin
from sa_jobqueue.ops.archive import Archiver, archive_now, partitions
from tests.integration.archive.conftest import drop_partitions
from tests.support.archive import add_job, counts
from tests.support.helpers import wait_for
from tests.support.models import Job, new_queue
from tests.support.processes import on_databases

HOUR = timedelta(hours=1)


def test_finished_jobs_older_than_archive_after_move_with_their_steps_and_history(archived):
    with archived.begin() as connection:
        old = {
            status: add_job(connection, status, "now() - interval '2 hours'", result='{"r": 1}')
            for status in ("done", "failed", "cancelled")
        }
        recent = add_job(connection, "done", "now() - interval '5 minutes'")
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
                "INSERT INTO sa_jobqueue_errors_jobs (job_id, attempt, worker, error)"
                " VALUES (:id, 1, 'w1', 'boom')"
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


def test_a_move_whose_finished_at_crosses_midnight_lands_in_two_day_partitions(archived):
    with archived.begin() as connection:
        before = add_job(connection, "done", "date_trunc('day', now()) - interval '1 day 1 second'")
        after = add_job(
            connection, "done", "date_trunc('day', now()) - interval '1 day' + interval '1 second'"
        )
    with archived.connect() as connection:
        assert archive_now(connection, Job, after=HOUR) == 2
        homes = dict(
            connection.execute(text("SELECT id, tableoid::regclass::text FROM jobs_archive")).all()
        )
        made = partitions(connection, Job)
    assert homes[before] != homes[after]
    days = {p.name: (p.high - p.low) for p in made}
    assert days[homes[before]] == days[homes[after]] == timedelta(days=1)


def test_partitions_are_made_ahead_of_now(archived):
    with archived.connect() as connection:
        assert archive_now(connection, Job, after=HOUR) == 0
        made = partitions(connection, Job)
        now = connection.execute(text("SELECT now()")).scalar_one()
    assert len(made) == 3
    assert made[0].low <= now < made[0].high
    assert made[-1].high >= now + timedelta(days=2)


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
                "UPDATE jobs SET status = 'done', finished_at = now() - interval '2 hours',"
                " result = '{\"x\": 1}' WHERE id = :id"
            ),
            {"id": ids[0]},
        )
        connection.execute(text("UPDATE jobs SET waiting_for = 1 WHERE id = :id"), {"id": ids[2]})
    with archived.connect() as connection:
        assert archive_now(connection, Job, after=HOUR) == 0  # ctx.upstream still reads it
        connection.execute(
            text(
                "UPDATE jobs SET status = 'cancelled',"
                " finished_at = now() - interval '2 hours' WHERE id <> :id"
            ),
            {"id": ids[0]},
        )
        connection.commit()
        assert archive_now(connection, Job, after=HOUR) == 3


def test_retention_drops_a_partition_while_a_dashboard_query_reads_the_archive(archived):
    with archived.begin() as connection:
        for days in (40, 39, 1):
            add_job(connection, "done", f"now() - interval '{days} days'")
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
        # The detach waits for the reader's transaction instead of breaking its reads;
        # a read started meanwhile no longer sees the partition being detached.
        wait_for(lambda: _waiting_detach(archived), what="the detach to wait for the reader")
        again = reader.execute(text("SELECT count(*) FROM jobs_archive")).scalar_one()
        assert 1 <= again <= 3
    finally:
        reading.commit()
        reader.close()
        thread.join(60)
    assert not thread.is_alive()
    assert len(dropped) == 2
    with archived.connect() as connection:
        assert counts(connection) == (0, 1)
        names = {p.name for p in partitions(connection, Job)}
        assert not names & set(dropped)
        for name in dropped:
            assert connection.execute(text("SELECT to_regclass(:n)"), {"n": name}).scalar() is None


def _expire(engine: Engine, archiver: Archiver) -> list[str]:
    with engine.connect() as connection:
        return archiver.expire(connection)


def _waiting_detach(engine: Engine) -> bool:
    with engine.connect() as connection:
        return bool(
            connection.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%DETACH PARTITION%'"
                    " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
                )
            ).scalar()
        )


class AppBase(DeclarativeBase):
    pass


Table("orders", AppBase.metadata, Column("id", Integer, primary_key=True))


class AppJob(JobMixin, AppBase):
    __tablename__ = "app_jobs"

    order_id: Mapped[int | None] = mapped_column(ForeignKey("orders.id"))
    note: Mapped[str | None] = mapped_column()


def test_the_apps_own_columns_travel_without_its_foreign_keys(committed):
    tables = [t for t in AppBase.metadata.sorted_tables if t.name != "orders"]
    AppBase.metadata.create_all(committed, tables=tables)
    try:
        with committed.begin() as connection:
            connection.execute(
                text("INSERT INTO orders (id, customer, total_cents) VALUES (7, 'd', 1)")
            )
            add_job(connection, "done", "now() - interval '2 hours'", table="app_jobs")
            connection.execute(text("UPDATE app_jobs SET order_id = 7, note = 'hi'"))
        with committed.connect() as connection:
            assert archive_now(connection, AppJob, after=HOUR) == 1
            row = connection.execute(text("SELECT columns FROM app_jobs_archive")).one()
            assert row.columns == {"order_id": 7, "note": "hi"}
            # The order can go: the archive keeps its id, not a reference to it.
            connection.execute(text("DELETE FROM orders WHERE id = 7"))
            connection.commit()
    finally:
        drop_partitions(committed, AppJob)
        AppBase.metadata.drop_all(committed, tables=tables)


@on_databases("sqlite", "mariadb")
def test_archive_after_is_refused_where_the_database_has_no_partitions(committed):
    jobs = new_queue()
    with pytest.raises(ConfigurationError, match="archive_after needs PostgreSQL's partitions"):
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
    assert "archive_after needs PostgreSQL's partitions" in lines[0]
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


def test_a_maintenance_round_moves_then_drops_what_is_past_the_retention(archived):
    with archived.begin() as connection:
        for days in (40, 1):
            add_job(connection, "done", f"now() - interval '{days} days'")
    archiver = Archiver(Job, HOUR, retention=timedelta(days=30))
    with archived.connect() as connection:
        assert archiver.maybe_run(connection, budget=30.0) == 2
        assert counts(connection) == (0, 1)  # the 40-day-old job left with its partition
        now = connection.execute(text("SELECT now()")).scalar_one()
        assert all(p.high > now - timedelta(days=30) for p in partitions(connection, Job))
