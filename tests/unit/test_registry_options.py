"""The registry's options and names: `gone_after` checked where it is given, the derived tables."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from sa_jobqueue import ConfigurationError
from sa_jobqueue.cli import main
from sa_jobqueue.schema.naming import check_table_name, errors_table, workers_table
from sa_jobqueue.worker.config import DEFAULT_GONE_AFTER, WorkerConfig


def test_gone_after_defaults_to_a_minute():
    assert WorkerConfig.from_options({}).gone_after == DEFAULT_GONE_AFTER == 60.0
    assert WorkerConfig.from_options({"gone_after": 2.5}).gone_after == 2.5


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), "60", True])
def test_gone_after_must_be_a_positive_number(bad):
    with pytest.raises(ConfigurationError, match="gone_after must be a positive number"):
        WorkerConfig.from_options({"gone_after": bad})


def test_the_worker_command_refuses_a_gone_after_of_zero():
    result = CliRunner().invoke(main, ["worker", "x:y", "--gone-after", "0"])
    assert result.exit_code == 2
    assert "--gone-after" in result.stderr


def test_the_registry_tables_are_named_after_the_jobs_table_within_the_length_limit():
    assert (workers_table("jobs"), errors_table("jobs")) == (
        "sa_jobqueue_worker_jobs",
        "sa_jobqueue_errors_jobs",
    )
    longest = "j" * 44
    assert check_table_name(longest) == longest  # the longest name that fitted still fits
    assert len(errors_table(longest)) <= 63
