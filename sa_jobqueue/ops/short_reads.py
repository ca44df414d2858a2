"""`short_reads`: plan a page's or ``stats``' statements as the short reads they are.

On PostgreSQL, for the statements inside it: no JIT compilation, no parallel workers
(`statements.common.SHORT_READ_SETTINGS`), the caller's settings back afterwards. See
docs/dashboard.md#cost-on-a-big-table.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.orm import Session

from sa_jobqueue.driver import driver_for
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.statements.common import SHORT_READ_SETTINGS, plan_settings, set_plan_settings

__all__ = ["short_reads"]


@contextmanager
def short_reads(session: Session, model: type[JobMixin]) -> Iterator[None]:
    """Run the statements inside with JIT and parallel workers off, in `session`'s transaction.

    Each statement of the overview and of ``stats`` reads a few index pages; on a table
    of millions of rows the planner's cost estimates still pass ``jit_above_cost``, and
    compiling the plan (tens to hundreds of milliseconds) or starting parallel workers
    then costs more than the read. The settings are ``set_config(..., true)``: they end
    with the transaction at the latest, and are set back to the caller's values when the
    block ends normally. Where the driver cannot set a transaction's settings
    (``supports_statement_timeout``: SQLite, MariaDB/MySQL), it does nothing.
    """
    if not driver_for(session, model).supports_statement_timeout:
        yield
        return
    before = session.execute(plan_settings()).one()._asdict()
    session.execute(set_plan_settings(), SHORT_READ_SETTINGS)
    yield
    session.execute(set_plan_settings(), before)
