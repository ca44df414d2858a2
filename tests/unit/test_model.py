"""JobMixin's table, the Status values and the backoff policy, without a database."""

from __future__ import annotations

import enum
import random
from typing import Any, cast

import pytest
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Integer,
    MetaData,
    SmallInteger,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.schema import CreateIndex, CreateTable
from sqlalchemy.types import TypeDecorator

from sa_jobqueue import JobMixin, Status
from sa_jobqueue.migration.scripts import jobs_table
from sa_jobqueue.retry import Backoff, exponential
from sa_jobqueue.schema.model import DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, FINISHED
from tests.support.models import Job


def _table(model: Any) -> Table:
    return cast(Table, model.__table__)


JOBS = _table(Job)


def _names(table) -> set[str]:
    names = {str(c.name) for c in table.constraints if c.name is not None}
    return names | {str(i.name) for i in table.indexes}


def _pg(element) -> str:
    return " ".join(str(element.compile(dialect=postgresql.dialect())).split())


def test_two_job_tables_share_one_metadata_without_name_collisions():
    class Base(DeclarativeBase):
        metadata = MetaData()

    class MailJob(JobMixin, Base):
        __tablename__ = "mail_jobs"

    class ReportJob(JobMixin, Base):
        __tablename__ = "report_jobs"

    mail, report = _table(MailJob), _table(ReportJob)
    assert _names(mail).isdisjoint(_names(report))
    assert all("mail_jobs" in name for name in _names(mail) - {"mail_jobs_pkey"})
    # Every index and non-primary-key constraint is named (no dialect-made names).
    for table in (mail, report):
        for item in [*table.indexes, *table.constraints]:
            if item is not table.primary_key:
                assert getattr(item, "name", None), item
    # create_all would emit each name once per table; PostgreSQL rejects repeats
    # schema-wide, so compare what the DDL would say.
    ddl = [_pg(CreateIndex(i)) for t in (mail, report) for i in t.indexes]
    assert len({d.split(" ON ")[0] for d in ddl}) == len(ddl) == 14


def test_columns_types_and_defaults_match_the_design():
    table = JOBS
    expected = {
        "id": BigInteger,
        "queue": Text,
        "kind": Text,
        "status": Text,
        "priority": SmallInteger,
        "attempts": Integer,
        "max_attempts": Integer,
        "run_at": DateTime,
        "locked_until": DateTime,
        "locked_by": Text,
        "idempotency_key": Text,
        "unique_key": Text,
        "last_error": Text,
        "created_at": DateTime,
        "updated_at": DateTime,
        "finished_at": DateTime,
        "concurrency_key": Text,
        "waiting_for": Integer,  # sajq_0005 (workflows)
        "after_failure": Text,
        "has_dependents": Boolean,
        "debounce_key": Text,
        "throttle_key": Text,
        "has_steps": Boolean,  # sajq_0007 (durable steps)
    }
    assert set(table.c.keys()) == {*expected, "payload", "result", "trace_context", "progress"}

    def declared(name: str) -> Any:  # a TypeDecorator's (Timestamp's) own type
        type_ = table.c[name].type
        return type_.impl if isinstance(type_, TypeDecorator) else type_

    for name, type_ in expected.items():
        assert isinstance(declared(name), type_), name
    for name in ("run_at", "locked_until", "created_at", "updated_at", "finished_at"):
        assert cast(DateTime, declared(name)).timezone, name
    nullable = {c.name for c in table.c if c.nullable}
    assert nullable == {
        "locked_until",
        "locked_by",
        "idempotency_key",
        "unique_key",
        "last_error",
        "finished_at",
        "concurrency_key",
        "result",
        "debounce_key",
        "throttle_key",
        "trace_context",
        "waiting_for",
        "after_failure",
        "has_dependents",
        "progress",
        "has_steps",
    }
    # Added by sajq_0004: JSONB (JSON elsewhere), and marked so create_jobs_table leaves them.
    for name in ("result", "trace_context"):
        assert table.c[name].type.compile(dialect=postgresql.dialect()) == "JSONB", name
        assert table.c[name].info == {"sa_jobqueue_revision": "sajq_0004"}
    assert table.c.id.primary_key
    assert table.c.id.identity is not None
    server_defaults = {
        c.name: str(getattr(c.server_default, "arg", None))
        for c in table.c
        if c.server_default is not None and c.name != "id"  # id's is its Identity
    }
    assert server_defaults == {
        "queue": "default",
        "payload": "'{}'",
        "status": "pending",
        "priority": "0",
        "attempts": "0",
        "max_attempts": str(DEFAULT_MAX_ATTEMPTS),
        "run_at": "now()",
        "created_at": "now()",
        "updated_at": "now()",
    }
    assert DEFAULT_QUEUE == "default"
    assert DEFAULT_MAX_ATTEMPTS == 20


def test_payload_is_jsonb_on_postgresql_and_json_elsewhere():
    assert "payload JSONB" in _pg(CreateTable(JOBS))
    on_sqlite = str(CreateTable(JOBS).compile(dialect=sqlite.dialect()))
    assert "payload JSON DEFAULT '{}' NOT NULL" in on_sqlite
    assert isinstance(JOBS.c.payload.type, JSON)


def test_status_check_unique_key_and_partial_indexes():
    table = JOBS
    checks = {c.name: str(c.sqltext) for c in table.constraints if isinstance(c, CheckConstraint)}
    assert checks == {
        "ck_jobs_status": (
            "status IN ('pending', 'running', 'done', 'failed', 'cancelled', 'waiting')"
        ),
        "ck_jobs_attempts": "attempts >= 0",
        "ck_jobs_max_attempts": "max_attempts >= 1",
    }
    (unique,) = [c for c in table.constraints if isinstance(c, UniqueConstraint)]
    assert unique.name == "uq_jobs_idempotency_key"
    assert [c.name for c in unique.columns] == ["idempotency_key"]
    indexes = {i.name: _pg(CreateIndex(i)) for i in table.indexes}
    assert indexes == {
        "ix_jobs_pending": "CREATE INDEX ix_jobs_pending ON jobs (queue, priority, run_at, id) "
        "WHERE status = 'pending'",
        "ix_jobs_running": "CREATE INDEX ix_jobs_running ON jobs (locked_until) "
        "WHERE status = 'running'",
        "ix_jobs_finished": "CREATE INDEX ix_jobs_finished ON jobs (finished_at) "
        "WHERE status IN ('done', 'failed', 'cancelled')",
        # unique_key: one active job per key; finished jobs free it.
        "uq_jobs_unique_key": "CREATE UNIQUE INDEX uq_jobs_unique_key ON jobs (unique_key) "
        "WHERE status IN ('pending', 'running')",
        # sajq_0006: one pending job per debounce key; a throttle key's jobs by run_at.
        "uq_jobs_debounce_key": "CREATE UNIQUE INDEX uq_jobs_debounce_key ON jobs "
        "(debounce_key) WHERE status = 'pending' AND debounce_key IS NOT NULL",
        "ix_jobs_throttle_key": "CREATE INDEX ix_jobs_throttle_key ON jobs "
        "(throttle_key, run_at) WHERE throttle_key IS NOT NULL",
        # sajq_0006: fair claims' walk over the keys of a kind's pending jobs.
        "ix_jobs_keyed": "CREATE INDEX ix_jobs_keyed ON jobs "
        "(queue, kind, concurrency_key, priority, run_at, id) "
        "WHERE status = 'pending' AND concurrency_key IS NOT NULL",
    }
    assert sorted(str(i.name) for i in table.indexes if i.unique) == [
        "uq_jobs_debounce_key",
        "uq_jobs_unique_key",
    ]


def test_migration_helpers_build_the_same_table_as_the_mixin():
    helper = jobs_table("jobs")
    assert _pg(CreateTable(helper)) == _pg(CreateTable(JOBS))
    assert sorted(_pg(CreateIndex(i)) for i in helper.indexes) == sorted(
        _pg(CreateIndex(i)) for i in JOBS.indexes
    )


def test_python_defaults_exist_for_plain_orm_inserts():
    defaults = {c.name: getattr(c.default, "arg", None) for c in JOBS.c}
    assert defaults["queue"] == "default"
    assert defaults["status"] == "pending"
    assert defaults["priority"] == 0
    assert defaults["attempts"] == 0
    assert defaults["max_attempts"] == DEFAULT_MAX_ATTEMPTS
    assert callable(defaults["payload"])  # a fresh {} per row, never one shared dict
    # Server-made values (id, run_at, created_at...) are read back at flush.
    assert Job.__mapper__.eager_defaults is True


def test_status_is_a_str_enum_of_the_design_values():
    assert issubclass(Status, str)
    assert issubclass(Status, enum.Enum)
    assert [s.value for s in Status] == [
        "pending",
        "running",
        "done",
        "failed",
        "cancelled",
        "waiting",  # workflows (sajq_0005): waits for other jobs, never claimed
    ]
    from_the_database: str = "pending"
    assert from_the_database == Status.PENDING  # compares as the plain string it is
    assert str(Status.FAILED) == "failed"
    assert f"{Status.DONE}" == "done"
    assert Status("cancelled") is Status.CANCELLED
    assert set(FINISHED) == {Status.DONE, Status.FAILED, Status.CANCELLED}


def test_mixin_repr_names_kind_status_and_attempts():
    job = Job(id=7, kind="send_receipt", queue="mail", status="pending", attempts=1)
    job.max_attempts = 5
    assert repr(job) == (
        "<Job id=7 kind='send_receipt' queue='mail' status='pending' attempts=1/5>"
    )


def test_backoff_grows_exponentially_and_caps():
    steady = Backoff(base=2, factor=2, cap=60, jitter=0)
    assert [steady(n) for n in range(1, 7)] == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0]
    assert steady(0) == 2.0
    assert steady(-5) == 2.0
    assert steady(10_000) == 60.0  # no float overflow on absurd attempt numbers
    assert Backoff(base=0, jitter=0)(3) == 0.0


def test_backoff_jitter_stays_within_its_band():
    rng_state = random.getstate()
    try:
        random.seed(1234)
        jittered = Backoff(base=10, factor=1, cap=100, jitter=0.25)
        delays = [jittered(1) for _ in range(500)]
    finally:
        random.setstate(rng_state)
    assert all(7.5 <= d <= 12.5 for d in delays)
    assert len(set(delays)) > 100  # actually random, so jobs that failed together spread out


def test_default_backoff_policy():
    assert exponential == Backoff(base=2.0, factor=2.0, cap=3600.0, jitter=0.1)
    assert 1.8 <= exponential(1) <= 2.2
    assert 3240 <= exponential(50) <= 3960


@pytest.mark.parametrize(
    "options",
    [
        {"base": -1},
        {"factor": 0.5},
        {"cap": -1},
        {"jitter": 1},
        {"jitter": -0.1},
        {"base": float("nan")},
    ],
)
def test_backoff_rejects_invalid_settings(options):
    with pytest.raises(ValueError, match="invalid backoff"):
        Backoff(**options)
