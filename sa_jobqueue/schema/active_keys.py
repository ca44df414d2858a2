"""Unique-while-active keys on MySQL and MariaDB, which have no partial index.

PostgreSQL and SQLite keep one active job per ``unique_key`` (pending or running) and one
pending job per ``debounce_key`` with partial unique indexes (`JobMixin`'s
``uq_<table>_unique_key`` / ``uq_<table>_debounce_key``). The MySQL family gets, instead, a
virtual generated column that holds the key while the job is active and NULL otherwise
(``unique_key_active``, ``debounce_key_pending``), under a plain unique index of the same
name as the partial one (a unique index admits many NULLs). Either way a second active
job with the key raises ``IntegrityError`` naming ``uq_<table>_<key>``.

The columns are DDL only, not mapped: ``create_all`` adds them (`sa_jobqueue.schema.ddl`),
and so do the revisions that add the keys (``sajq_0002``, ``sajq_0006``). See
docs/databases.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Index

from sa_jobqueue.schema.naming import check_identifier
from sa_jobqueue.schema.types import MYSQL

__all__ = ["ACTIVE_KEYS", "ActiveKey", "mysql_qualified", "not_mysql"]


@dataclass(frozen=True, slots=True)
class ActiveKey:
    """A key column unique among active jobs, and its generated column on MySQL.

    Attributes:
        column: the mapped key column (``unique_key``).
        generated: the virtual column holding it while `condition` holds.
        condition: when the key counts (a SQL predicate on the jobs table).
        revision: the shipped revision that adds the key.
    """

    column: str
    generated: str
    condition: str
    revision: str

    def index(self, table: str) -> str:
        """The unique index's name: the partial index's name on the other databases."""
        return f"uq_{table}_{self.column}"

    def add_column_sql(self, table: str, schema: str | None = None) -> str:
        """``ALTER TABLE ... ADD COLUMN`` of the generated column."""
        return (
            f"ALTER TABLE {mysql_qualified(table, schema)} ADD COLUMN `{self.generated}` "
            f"VARCHAR(191) COLLATE utf8mb4_bin "
            f"AS (CASE WHEN {self.condition} THEN `{self.column}` END) VIRTUAL"
        )

    def create_index_sql(self, table: str, schema: str | None = None) -> str:
        """``CREATE UNIQUE INDEX`` on the generated column."""
        return (
            f"CREATE UNIQUE INDEX `{self.index(table)}` "
            f"ON {mysql_qualified(table, schema)} (`{self.generated}`)"
        )

    def drop_index_sql(self, table: str, schema: str | None = None) -> str:
        """``DROP INDEX`` of the unique index."""
        return f"DROP INDEX `{self.index(table)}` ON {mysql_qualified(table, schema)}"

    def drop_column_sql(self, table: str, schema: str | None = None) -> str:
        """``ALTER TABLE ... DROP COLUMN`` of the generated column."""
        return f"ALTER TABLE {mysql_qualified(table, schema)} DROP COLUMN `{self.generated}`"


#: The keys unique while their job is active, in the order their revisions add them.
ACTIVE_KEYS = (
    ActiveKey("unique_key", "unique_key_active", "status IN ('pending', 'running')", "sajq_0002"),
    ActiveKey("debounce_key", "debounce_key_pending", "status = 'pending'", "sajq_0006"),
)


def mysql_qualified(name: str, schema: str | None) -> str:
    """```schema`.`name``` (or ```name```), once both are checked plain identifiers."""
    quoted = f"`{check_identifier(name)}`"
    return f"`{check_identifier(schema)}`.{quoted}" if schema else quoted


def not_mysql(index: Index) -> Index:
    """`index`, made by ``create_all`` on every database but the MySQL family."""

    def wanted(ddl: object, target: object, bind: object, **kw: object) -> bool:
        dialect = kw.get("dialect")
        return getattr(dialect, "name", None) not in MYSQL

    return index.ddl_if(callable_=wanted)  # type: ignore[arg-type]
