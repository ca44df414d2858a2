"""docs/databases.md's feature matrix: each "no" is a call that says so, in one line.

Every cell of the matrix that starts with "no" names a feature a database lacks; the
check registered here for that feature's row makes the call on that database and
requires a one-line refusal that names the database. A "no" without a check, or a
check for a cell that is not "no", fails the first test.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sa_jobqueue.errors import ConfigurationError

PAGE = Path(__file__).resolve().parents[2] / "docs" / "databases.md"
COLUMNS = ("postgresql", "sqlite", "mariadb")


def matrix() -> dict[str, dict[str, str]]:
    """Feature (its row's first cell) -> database -> the cell, from the page's table."""
    text = PAGE.read_text()
    table = text[text.index("## Feature matrix") :]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    cells = {}
    for line in rows[1:]:  # rows[0] is the header
        feature, *values = [cell.strip() for cell in line.strip("|").split("|")]
        cells[feature] = dict(zip(COLUMNS, values, strict=True))
    return cells


def refused(command: list[str]) -> str:
    """The one line `sa-jobqueue COMMAND` fails with (exit status not 0)."""
    run = subprocess.run(
        [sys.executable, "-m", "sa_jobqueue.cli", *command],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode != 0, run.stdout
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


def raised(call: Callable[[], object]) -> str:
    with pytest.raises(ConfigurationError) as error:
        call()
    message = str(error.value)
    assert "\n" not in message
    return message


def adopt(url: str) -> str:
    return refused(["migrate", "--adopt", "--database-url", url])


def sql_function(url: str) -> str:
    return refused(["sql", "--database-url", url])


def archive(url: str) -> str:
    return refused(
        ["worker", "tests.support.apps.flow:jobs", "--database-url", url, "--archive-after", "1h"]
    )


#: The first cell of a row with a "no" -> the call that must say so.
CHECKS: dict[str, Callable[[str], str]] = {
    "`sa-jobqueue migrate --adopt`": adopt,
    "`<table>_enqueue(...)` SQL function": sql_function,
    "archive partitioned by finished time (`--archive-after`, `--archive-retention`)": archive,
}

NOS = sorted(
    (feature, database)
    for feature, cells in matrix().items()
    for database, cell in cells.items()
    if re.match(r"no\b", cell)
)


def test_every_no_of_the_matrix_has_its_check():
    assert NOS, "the matrix lists no 'no': then this file has nothing to check"
    assert {feature for feature, _ in NOS} == set(CHECKS)


@pytest.mark.parametrize(("feature", "database"), NOS)
def test_a_feature_a_database_lacks_says_so_in_one_line(
    feature: str, database: str, request: pytest.FixtureRequest
):
    url = request.getfixturevalue(f"{database}_url")
    message = CHECKS[feature](url)
    assert database in message.lower(), message
