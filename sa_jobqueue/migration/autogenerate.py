"""`include_object`: keep Alembic's autogenerate off what the jobs tables make at runtime.

On MariaDB and MySQL the unique-while-active keys are virtual generated columns under
unique indexes (`sa_jobqueue.schema.active_keys`), made by the revisions and by
``create_all`` but not mapped: autogenerate, comparing the database with your models,
would propose to drop the columns and to put the indexes back on the plain key
columns, which would break the keys. Pass this hook to ``context.configure`` in your
``env.py`` (Flask-Migrate's included) and autogenerate leaves them alone; on
PostgreSQL it leaves out the archive's partitions (``<table>_archive_YYMMDDHHMM``, made
and dropped by workers: docs/operations.md#archive-and-retention), which autogenerate
would propose to drop. On MySQL it also leaves ``ix_<table>_pending`` and
``ix_<table>_running`` alone: keyed on status there (`sa_jobqueue.schema.status_indexes`),
where the model declares the other databases' partial indexes under those names. See
docs/databases.md.
"""

from __future__ import annotations

import re
from typing import Any

from sa_jobqueue.schema.active_keys import ACTIVE_KEYS
from sa_jobqueue.schema.status_indexes import is_mysql_status_index

__all__ = ["include_object"]

_GENERATED = frozenset(key.generated for key in ACTIVE_KEYS)
#: An archive partition's name (`sa_jobqueue.schema.naming.archive_partition_name`).
_PARTITION = re.compile(r"[A-Za-z_][A-Za-z0-9_]*_archive_[0-9]{10}")


def include_object(
    object: Any,
    name: str | None,
    type_: str,
    reflected: bool,
    compare_to: Any,
) -> bool:
    """Alembic's ``include_object`` hook: False for the generated key columns and their indexes.

    An index counts as theirs when it, or the index it is compared with, covers a
    generated key column (``unique_key_active``, ``debounce_key_pending``); so does
    MySQL's indexes keyed on status (``ix_<table>_pending``, ``ix_<table>_running``). The id
    columns of the library's tables are left out too where the database reflects no
    identity (SQLite's rowid, MySQL's AUTO_INCREMENT). So are the archive's partitions
    (reflected tables named ``<table>_archive_YYMMDDHHMM`` that no model declares).
    """
    if type_ == "table":  # an archive partition no model declares
        return not (reflected and compare_to is None and _PARTITION.fullmatch(name or ""))
    if type_ == "column":
        return name not in _GENERATED and not _identity_beyond_the_database(object, compare_to)
    if type_ == "index":
        return not any(
            _covers_generated(index) or is_mysql_status_index(index)
            for index in (object, compare_to)
        )
    return True


def _identity_beyond_the_database(column: Any, reflected: Any) -> bool:
    """A library table's ``Identity()`` id where the database reflects none (SQLite, MySQL).

    Their ids are the rowid and AUTO_INCREMENT; an older Alembic proposes to add the
    identity to them (``modify_default``), which those databases cannot hold.
    """
    table = getattr(column, "table", None)
    ours = table is not None and (
        table.info.get("sa_jobqueue_ddl") or str(table.name).startswith("sa_jobqueue_")
    )
    return bool(
        ours
        and getattr(column, "identity", None) is not None
        and reflected is not None
        and getattr(reflected, "identity", None) is None
    )


def _covers_generated(index: Any) -> bool:
    columns = getattr(index, "columns", None) or ()
    return any(getattr(column, "name", None) in _GENERATED for column in columns)
