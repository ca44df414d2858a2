"""The counters' DDL text: one trigger per database, and clear errors for what it cannot make."""

from __future__ import annotations

import pytest

from sa_jobqueue import ConfigurationError
from sa_jobqueue.schema.counters import backfill_sql, counter_trigger_sql, drop_counter_trigger_sql


@pytest.mark.parametrize("dialect", ["postgresql", "sqlite", "mysql", "mariadb"])
def test_each_database_gets_a_trigger_on_an_ending_and_on_a_finished_insert(dialect):
    made = counter_trigger_sql(dialect, "jobs", "app")
    assert len(made) == (3 if dialect == "postgresql" else 2)
    assert sum("AFTER UPDATE" in sql for sql in made) == 1
    assert sum("AFTER INSERT" in sql for sql in made) == 1
    assert all("sa_jobqueue_ended_jobs" in sql or "FUNCTION" in sql for sql in made[-2:])
    assert drop_counter_trigger_sql(dialect, "jobs", "app")
    assert "INSERT INTO" in backfill_sql(dialect, "jobs", "app")


def test_a_database_without_a_trigger_is_refused_by_name():
    with pytest.raises(ValueError, match="no counters trigger for the dialect 'oracle'"):
        counter_trigger_sql("oracle", "jobs")


@pytest.mark.parametrize(("table", "schema"), [("jobs; DROP", None), ("jobs", "a b"), ("", None)])
def test_a_name_that_is_not_a_plain_identifier_is_refused(table, schema):
    with pytest.raises(ConfigurationError, match="must be letters, digits and _"):
        counter_trigger_sql("postgresql", table, schema)
    with pytest.raises(ConfigurationError, match="must be letters, digits and _"):
        backfill_sql("sqlite", table, schema)
