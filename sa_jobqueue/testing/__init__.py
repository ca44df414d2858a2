"""Test helpers for applications that use sa-jobqueue, and throwaway PostgreSQL servers.

What a test of an application needs (see docs/testing.md):

* assertions on what the code under test enqueued, read from the test's session:
  `assert_enqueued`, `refute_enqueued`, `enqueued` (and `aassert_enqueued`,
  `arefute_enqueued`, `aenqueued` for an `AsyncSession`);
* running jobs in the test's process: `perform` (one handler, now; `aperform`
  for an ``async def`` one), `drain`
  (every due job, with each attempt's `JobOutcome`), and `run_on_commit`
  (jobs run right after the transaction that enqueued them commits);
* a PostgreSQL to run against: `throwaway_postgres` (testcontainers, the
  machine's binaries, or an embedded server), `scratch_database`, `local_cluster`.

The pytest fixtures built on them live in `sa_jobqueue.pytest_plugin`. Nothing in
this package is imported by the library itself, so nothing here can be switched
on in production by importing the queue.
"""

from __future__ import annotations

from sa_jobqueue.testing.assertions import (
    aassert_enqueued,
    aenqueued,
    arefute_enqueued,
    assert_enqueued,
    enqueued,
    payload_contains,
    refute_enqueued,
)
from sa_jobqueue.testing.draining import JobOutcome, drain
from sa_jobqueue.testing.on_commit import RunOnCommit, run_on_commit
from sa_jobqueue.testing.running import aperform, perform
from sa_jobqueue.testing.servers import (
    LocalCluster,
    NoPostgresError,
    local_cluster,
    scratch_database,
    throwaway_postgres,
)

__all__ = [
    "JobOutcome",
    "LocalCluster",
    "NoPostgresError",
    "RunOnCommit",
    "aassert_enqueued",
    "aenqueued",
    "aperform",
    "arefute_enqueued",
    "assert_enqueued",
    "drain",
    "enqueued",
    "local_cluster",
    "payload_contains",
    "perform",
    "refute_enqueued",
    "run_on_commit",
    "scratch_database",
    "throwaway_postgres",
]
