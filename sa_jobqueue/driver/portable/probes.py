"""`probe`: a read that only decides whether a transaction has work to do.

On SQLite a worker's transactions take the file's one write lock (``BEGIN
IMMEDIATE``) before their first statement, so a round that finds nothing to do would
still hold every other writer off while it looks. A statement marked with `probe`
that comes first in its transaction runs in a plain read transaction instead (no
write lock, WAL readers never wait); the first statement after it that is not a
probe ends that read and takes the write lock (`sqlite.engines.worker_engine`). What
a probe read is therefore never trusted afterwards: the work re-checks it under the
lock (a claim's ``UPDATE ... WHERE`` re-reads what is due). Other databases ignore
the mark.
"""

from __future__ import annotations

from typing import TypeVar

from sqlalchemy import Executable

__all__ = ["PROBE", "probe"]

#: The execution option that marks a probe (`probe`).
PROBE = "sa_jobqueue_probe"

E = TypeVar("E", bound=Executable)


def probe(statement: E) -> E:
    """`statement` marked as a probe: a read whose result the transaction re-checks."""
    return statement.execution_options(**{PROBE: True})
