"""Archived jobs for the operator paths: read one by id, move failed ones back to retry.

`find_archived` is where ``jobs.wait``, ``sa-jobqueue jobs show`` and the dashboard's
job page look when the jobs table has no row for an id; `restore_archived` is what
``retry`` runs first, so an archived ``failed`` or ``cancelled`` job is moved back
whole (its app columns, steps and attempt history) and retried like any other.
Where the database has partitions (PostgreSQL, MariaDB: `Driver.supports_partitions`);
elsewhere nothing is ever archived, and both do nothing.
See docs/operations.md#archive-and-retention.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from sa_jobqueue.driver import driver_for
from sa_jobqueue.schema.model import FINISHED, JobMixin
from sa_jobqueue.statements import archive as archive_sql

__all__ = ["find_archived", "list_archived", "restore_archived"]


def _connection(bind: Connection | Session) -> Connection:
    return bind.connection() if isinstance(bind, Session) else bind


def _has_archive(bind: Connection | Session, model: type[JobMixin]) -> bool:
    connection = _connection(bind)
    driver = driver_for(connection, model)
    return driver.supports_partitions and driver.archive.exists(connection)


def find_archived(bind: Connection | Session, model: type[JobMixin], job_id: int) -> Any | None:
    """The archived job `job_id` as a row with the jobs table's column names, or None.

    Two reads (whether the archive exists, then the row by id: one index probe per
    partition), made only when the jobs table had no row for the id.
    """
    if not _has_archive(bind, model):
        return None
    return bind.execute(archive_sql.archived_job(model), {"job_id": job_id}).first()


def list_archived(
    session: Session,
    model: type[JobMixin],
    filters: dict[str, list[str]],
    limit: int,
    *,
    before: int | None = None,
) -> list[Any]:
    """Up to `limit` archived jobs matching `filters` (``status``/``queue``/``kind``), newest first.

    Nothing when `filters` allows no finished status (no archived job has another).
    `before`: only ids below it (the next page of a list).
    """
    finished = {s.value for s in FINISHED}
    if "status" in filters and not finished & set(filters["status"]):
        return []
    if not _has_archive(session, model):
        return []
    query = archive_sql.archived_list(model, filters, before=before is not None)
    params: dict[str, Any] = {"limit": limit, "before": before}
    return list(session.execute(query, params).all())


def restore_archived(session: Session, model: type[JobMixin], ids: Iterable[int]) -> list[int]:
    """Move the archived ``failed``/``cancelled`` jobs among `ids` back into the jobs table.

    In the caller's transaction (never commits; one statement on PostgreSQL); returns
    the ids moved. The jobs come back as they were archived, with their steps and
    attempt history.
    """
    wanted = list(ids)
    if not wanted or not _has_archive(session, model):
        return []
    connection = session.connection()
    archive = driver_for(connection, model).archive
    return archive.restore(connection, wanted, uncount=archive.counters_exist(connection))
