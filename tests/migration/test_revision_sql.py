"""What each shipped revision does on PostgreSQL, statement by statement, never changes.

Every revision is run up from the one before it, and down again, on a scratch database,
and the schema-changing statements PostgreSQL receives (DDL, and DML outside Alembic's
own version table) are compared with ``tests/migration/sql/<revision>.sql``. The
reads Alembic and the helpers make to inspect the schema are left out: they are
SQLAlchemy's, and change between its versions. A revision taught another database
(SQLite, MariaDB) must leave its PostgreSQL file unchanged. To accept a new revision's
file: ``SAJQ_UPDATE_SQL=1 pytest tests/migration/test_revision_sql.py`` and review it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from sa_jobqueue import migration
from sa_jobqueue.migration.versions import VERSIONS
from tests.support.revisions import down_revision
from tests.support.schema_shape import engine_wide_listener

SQL_DIR = Path(__file__).parent / "sql"
REVISIONS = [version.revision for version in VERSIONS]
#: The first word of a statement that changes the schema or its rows.
CHANGES = ("ALTER", "COMMENT", "CREATE", "DELETE", "DO", "DROP", "INSERT", "UPDATE")


def _bookkeeping(statement: str) -> bool:
    """Alembic's own version table (its statements change with Alembic's version)."""
    return "alembic_version" in statement or "sa_jobqueue_version_" in statement


@contextmanager
def _statements() -> Iterator[list[str]]:
    """The changing statements any engine sends meanwhile, whitespace made single spaces."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        text = " ".join(statement.split())
        if not text.upper().startswith(CHANGES) or _bookkeeping(text):
            return
        if parameters:
            text += f"  -- {parameters!r}"
        seen.append(text)

    with engine_wide_listener("before_cursor_execute", record):
        yield seen


def _sql(revision: str, upgrade: list[str], downgrade: list[str]) -> str:
    def block(title: str, statements: list[str]) -> str:
        return f"-- {title}\n" + "".join(f"{statement};\n" for statement in statements)

    header = f"-- {revision} on PostgreSQL (tests/migration/test_revision_sql.py)\n"
    return header + block("upgrade", upgrade) + block("downgrade", downgrade)


@pytest.mark.parametrize("revision", REVISIONS)
def test_a_shipped_revision_sends_postgresql_the_same_statements(
    scratch: tuple[str, Engine], revision: str
) -> None:
    url, _ = scratch
    before = down_revision(revision) if revision != REVISIONS[0] else None
    if before is not None:
        migration.upgrade(url, revision=before)
    with _statements() as upgrade:
        migration.upgrade(url, revision=revision)
    with _statements() as downgrade:
        migration.downgrade(url, revision=before or "base")
    got = _sql(revision, upgrade, downgrade)
    path = SQL_DIR / f"{revision}.sql"
    if os.environ.get("SAJQ_UPDATE_SQL") or not path.exists():
        if os.environ.get("CI") and not path.exists():
            pytest.fail(f"{path} is missing: run SAJQ_UPDATE_SQL=1 pytest {__file__}")
        SQL_DIR.mkdir(exist_ok=True)
        path.write_text(got)
    assert got == path.read_text(), f"{revision} changed what it does"
