"""The worker's start-up check and the app's own columns (issue 41, item 1).

A jobs table with one own column of each common type, made as ``create_all``, Alembic or
Flask-Migrate make it, passes the check (``character varying(36)`` is ``VARCHAR(36)``);
what would break the library's statements or every insert is still refused, in one line
that says what differs and how to fix it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text

from sa_jobqueue import ConfigurationError, JobQueue
from sa_jobqueue.migration import preflight
from tests.support.own_types import OwnTypesJob, TypedBase


@pytest.fixture
def typed(engine: Engine) -> Iterator[Engine]:
    TypedBase.metadata.create_all(engine)
    try:
        yield engine
    finally:
        TypedBase.metadata.drop_all(engine)


def test_own_columns_of_every_common_type_pass_the_start_up_check(typed):
    with typed.connect() as conn:
        assert preflight.table_differences(conn, OwnTypesJob.__table__) == []  # type: ignore[arg-type]
        preflight.check_table(conn, OwnTypesJob)
    assert JobQueue(OwnTypesJob).worker(typed).drain() == 0


def test_a_missing_own_column_is_refused_naming_the_fix(typed):
    with typed.begin() as conn:
        conn.execute(text("ALTER TABLE own_types_jobs DROP COLUMN task_id"))
    with typed.connect() as conn, pytest.raises(ConfigurationError) as refused:
        preflight.check_table(conn, OwnTypesJob)
    message = str(refused.value)
    assert "column task_id (varchar(36)) is missing" in message
    assert "migration" in message


def test_an_own_column_not_null_in_the_database_but_nullable_in_the_model_is_refused(typed):
    with typed.begin() as conn:
        conn.execute(text("ALTER TABLE own_types_jobs ALTER COLUMN note SET NOT NULL"))
    with typed.connect() as conn, pytest.raises(ConfigurationError) as refused:
        preflight.check_table(conn, OwnTypesJob)
    message = str(refused.value)
    assert "column note is NOT NULL without a default, and nullable in the model" in message
    assert "declare it nullable=False, or give it a default" in message


def test_a_library_column_of_another_type_is_still_refused(typed):
    with typed.begin() as conn:
        conn.execute(text("ALTER TABLE own_types_jobs ALTER COLUMN priority TYPE integer"))
    with typed.connect() as conn, pytest.raises(ConfigurationError) as refused:
        preflight.check_table(conn, OwnTypesJob)
    message = str(refused.value)
    assert "column priority is integer, not smallint" in message
    assert "migration" in message
