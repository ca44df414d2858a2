"""Test helpers for applications that use sa-jobqueue, and throwaway PostgreSQL servers.

Assertions on what the code under test enqueued, running jobs in the test's process
(`perform`, `drain`, `run_on_commit`), replaying a job's recorded steps against
today's code (`replay`) and a PostgreSQL to run against (`throwaway_postgres`).
The library never imports this package. See docs/testing.md.
"""

from __future__ import annotations

from sa_jobqueue.testing.assertions import (
    aassert_enqueued,
    aenqueued,
    arefute_enqueued,
    assert_enqueued,
    enqueued,
    refute_enqueued,
)
from sa_jobqueue.testing.draining import JobOutcome, drain
from sa_jobqueue.testing.matching import payload_contains
from sa_jobqueue.testing.on_commit import RunOnCommit, run_on_commit
from sa_jobqueue.testing.replay import Replayed, replay
from sa_jobqueue.testing.running import aperform, perform
from sa_jobqueue.testing.servers import (
    LocalCluster,
    NoPostgresError,
    local_cluster,
    scratch_database,
    throwaway_postgres,
)
from sa_jobqueue.testing.signal_assertions import (
    aassert_waiting_for_signal,
    assert_waiting_for_signal,
)

__all__ = [
    "JobOutcome",
    "LocalCluster",
    "NoPostgresError",
    "Replayed",
    "RunOnCommit",
    "aassert_enqueued",
    "aassert_waiting_for_signal",
    "aenqueued",
    "aperform",
    "arefute_enqueued",
    "assert_enqueued",
    "assert_waiting_for_signal",
    "drain",
    "enqueued",
    "local_cluster",
    "payload_contains",
    "perform",
    "refute_enqueued",
    "replay",
    "run_on_commit",
    "scratch_database",
    "throwaway_postgres",
]
