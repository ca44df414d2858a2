"""`PortableTables`: the jobs table and the small tables beside it, for the portable families."""

from __future__ import annotations

from functools import cached_property

from sqlalchemy import Table

from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.schema.registry_tables import workers_table_for
from sa_jobqueue.schema.state_tables import paused_table_for, schedules_table_for

__all__ = ["PortableTables"]


class PortableTables(PortableBase):
    """The tables of `model`, each looked up once per driver."""

    @cached_property
    def _jobs_table(self) -> Table:
        """The jobs table (SQLite's `Dialect.write_lock` is taken on it: it is the database's)."""
        table = self.model.__table__
        assert isinstance(table, Table)  # noqa: S101 - JobMixin maps a Table
        return table

    @cached_property
    def _schedules_table(self) -> Table:
        """The schedules table beside the jobs table."""
        return schedules_table_for(self._jobs_table)

    @cached_property
    def _paused_table(self) -> Table:
        """The paused-queues table beside the jobs table."""
        return paused_table_for(self._jobs_table)

    @cached_property
    def _workers_table(self) -> Table:
        """The worker registry beside the jobs table."""
        return workers_table_for(self._jobs_table)
