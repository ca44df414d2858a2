"""Names derived from a jobs table: its channel, version table, trigger function, locks.

Pure functions of the table's name, so the migration, the worker, the listener and the
operator commands agree on each name without importing one another. See docs/migrations.md.

>>> channel_name("jobs")
'sa_jobqueue_jobs'
>>> version_table("jobs")
'sa_jobqueue_version_jobs'
>>> paused_queues_table("jobs"), schedules_table("jobs")
('sa_jobqueue_paused_jobs', 'sa_jobqueue_schedules_jobs')
>>> starts_table_name("jobs")
'sa_jobqueue_starts_jobs'
>>> dependencies_table_name("jobs")
'sa_jobqueue_deps_jobs'
>>> ended_channel_name("jobs")
'sa_jobqueue_ended_jobs'
>>> workers_table("jobs"), errors_table("jobs")
('sa_jobqueue_worker_jobs', 'sa_jobqueue_errors_jobs')
>>> archive_table_name("jobs")
'jobs_archive'
>>> lock_name("jobs", "sweep")
'sa_jobqueue:jobs:sweep'
"""

from __future__ import annotations

import re

from sa_jobqueue.errors import ConfigurationError

__all__ = [
    "IDENTIFIER_MAX",
    "archive_partition_name",
    "archive_table_name",
    "channel_name",
    "check_identifier",
    "check_table_name",
    "control_channel_name",
    "counts_table",
    "dependencies_table_name",
    "derived_names",
    "ended_channel_name",
    "ended_table",
    "errors_table",
    "lock_name",
    "notify_function_name",
    "paused_queues_table",
    "schedules_due_index",
    "schedules_table",
    "signals_table_name",
    "starts_table_name",
    "steps_table_name",
    "turns_table",
    "version_table",
    "weights_table",
    "workers_table",
]

#: PostgreSQL's limit on identifier length (NAMEDATALEN - 1).
IDENTIFIER_MAX = 63

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_identifier(name: str) -> str:
    """Return `name` if it is a plain SQL identifier (a table or schema name), else raise.

    DDL cannot bind identifiers as parameters, so the helpers accept only names that
    need no quoting tricks: letters, digits and ``_``, at most 63 characters.

    >>> check_identifier("jobs")
    'jobs'
    """
    if not (isinstance(name, str) and _IDENTIFIER.fullmatch(name) and len(name) <= IDENTIFIER_MAX):
        raise ConfigurationError(
            f"table/schema name {name!r} must be letters, digits and _ (at most 63), "
            "not starting with a digit"
        )
    return name


def derived_names(table: str, *, migrated: bool = False) -> list[str]:
    """Every name derived from the jobs table `table`: constraints, indexes, trigger, channel.

    With `migrated`, also the names ``sa-jobqueue migrate`` adds: its version table
    and that table's primary key (``<version table>_pkc``, named by Alembic).
    """
    names = [
        f"ck_{table}_status",
        f"ck_{table}_attempts",
        f"ck_{table}_max_attempts",
        f"uq_{table}_idempotency_key",
        f"ix_{table}_pending",
        f"ix_{table}_running",
        f"ix_{table}_finished",
        f"sa_jobqueue_notify_{table}",
        f"sa_jobqueue_{table}",
        f"sa_jobqueue_starts_{table}",
        f"ix_{table}_starts",
        f"uq_{table}_debounce_key",
        f"ix_{table}_throttle_key",
        f"ix_{table}_keyed",
        f"sa_jobqueue_weight_{table}",
        f"sa_jobqueue_turns_{table}",
        f"sa_jobqueue_deps_{table}",
        f"pk_{table}_deps",
        f"fk_{table}_deps_job",
        f"fk_{table}_deps_upstream",
        f"ix_{table}_deps_upstream",
        f"sa_jobqueue_steps_{table}",
        f"pk_{table}_steps",
        f"fk_{table}_steps",
        f"sa_jobqueue_signal_{table}",
        f"pk_{table}_signals",
        f"fk_{table}_signals",
        f"ix_{table}_signals_job",
        f"sa_jobqueue_worker_{table}",
        f"pk_{table}_worker",
        f"sa_jobqueue_errors_{table}",
        f"pk_{table}_errors",
        f"fk_{table}_errors_job",
        schedules_due_index(table),
        f"{table}_enqueue",
        archive_table_name(table),
        f"pk_{table}_archive",
        f"ix_{table}_archived",
        archive_partition_name(table, "0000000000"),
        counts_table(table),
        f"pk_{table}_counts",
        ended_table(table),
        f"pk_{table}_ended",
        f"{table}_count_ended",
    ]
    if migrated:
        names += [f"sa_jobqueue_version_{table}", f"sa_jobqueue_version_{table}_pkc"]
    return names


def check_table_name(table: str, *, migrated: bool = False) -> str:
    """Return `table` if it and every name derived from it fit PostgreSQL's 63 characters.

    PostgreSQL would cut a longer name silently (two tables could then share a
    constraint or a channel) and SQLAlchemy refuses it, so it is refused here,
    naming the longest derived name and the longest table name that fits.

    >>> check_table_name("jobs")
    'jobs'
    >>> check_table_name("j" * 45)
    Traceback (most recent call last):
    ...
    sa_jobqueue.ConfigurationError: table name ... use at most 44
    """
    check_identifier(table)
    names = derived_names(table, migrated=migrated)
    longest = max(names, key=len)
    if len(longest) > IDENTIFIER_MAX:
        fits = IDENTIFIER_MAX - (len(longest) - len(table))
        raise ConfigurationError(
            f"table name {table!r} is too long ({len(table)} characters): the name derived "
            f"from it {longest!r} would be {len(longest)} characters, over PostgreSQL's "
            f"{IDENTIFIER_MAX}; use at most {fits}"
        )
    return table


def version_table(table: str) -> str:
    """The version table `sa-jobqueue migrate` records its revisions in for `table`."""
    return f"sa_jobqueue_version_{table}"[:IDENTIFIER_MAX]


def starts_table_name(table: str) -> str:
    """The table where `table`'s rate-limited kinds log their attempt starts."""
    return f"sa_jobqueue_starts_{table}"[:IDENTIFIER_MAX]


def dependencies_table_name(table: str) -> str:
    """The table of `table`'s dependency edges: which job waits for which (docs/workflows.md)."""
    return f"sa_jobqueue_deps_{table}"[:IDENTIFIER_MAX]


def steps_table_name(table: str) -> str:
    """The table of the steps `table`'s jobs recorded (``ctx.step``, docs/durable.md)."""
    return f"sa_jobqueue_steps_{table}"[:IDENTIFIER_MAX]


def signals_table_name(table: str) -> str:
    """The table of the signals sent to `table`'s jobs (``jobs.signal``, docs/durable.md)."""
    return f"sa_jobqueue_signal_{table}"[:IDENTIFIER_MAX]


def channel_name(table: str) -> str:
    """The LISTEN/NOTIFY channel on which inserts into `table` are announced."""
    return f"sa_jobqueue_{table}"[:IDENTIFIER_MAX]


def notify_function_name(table: str) -> str:
    """The trigger function that sends `table`'s notifications."""
    return f"sa_jobqueue_notify_{table}"[:IDENTIFIER_MAX]


def lock_name(table: str, purpose: str) -> str:
    """The text hashed into `table`'s advisory-lock key for `purpose` (``sweep``, ``prune``)."""
    return f"sa_jobqueue:{table}:{purpose}"


def control_channel_name(table: str) -> str:
    """The channel on which `jobs.cancel` tells workers which running jobs of `table` stop."""
    return f"sa_jobqueue_control_{table}"[:IDENTIFIER_MAX]


def ended_channel_name(table: str) -> str:
    """The channel on which the ids of `table`'s jobs that ended are announced (`jobs.wait`)."""
    return f"sa_jobqueue_ended_{table}"[:IDENTIFIER_MAX]


def paused_queues_table(table: str) -> str:
    """The table listing `table`'s paused queues (one row per paused queue)."""
    return f"sa_jobqueue_paused_{table}"[:IDENTIFIER_MAX]


def schedules_table(table: str) -> str:
    """The table holding the next tick of each periodic schedule of `table`."""
    return f"sa_jobqueue_schedules_{table}"[:IDENTIFIER_MAX]


def schedules_due_index(table: str) -> str:
    """The schedules table's index of due rows (revision ``sajq_0009``) beside `table`.

    ``(next_run_at) WHERE paused_at IS NULL``: what every worker's once-a-second round
    reads, so that round costs the same beside 10 schedules or 10,000.
    """
    return f"ix_{table}_schedules_due"


def weights_table(table: str) -> str:
    """The table of the fair kinds' weights per ``concurrency_key`` of `table`."""
    return f"sa_jobqueue_weight_{table}"[:IDENTIFIER_MAX]


def turns_table(table: str) -> str:
    """The table of the fair kinds' turns: where each ``concurrency_key`` stands."""
    return f"sa_jobqueue_turns_{table}"[:IDENTIFIER_MAX]


def workers_table(table: str) -> str:
    """The worker registry of `table`: one row per running worker (docs/workers-registry.md)."""
    return f"sa_jobqueue_worker_{table}"[:IDENTIFIER_MAX]


def errors_table(table: str) -> str:
    """The attempt history of `table`: one row per failed attempt of a job, bounded per job."""
    return f"sa_jobqueue_errors_{table}"[:IDENTIFIER_MAX]


def archive_table_name(table: str) -> str:
    """The archive of `table`: its finished jobs, range-partitioned by ``finished_at``."""
    return f"{table}_archive"


def archive_partition_name(table: str, start: str) -> str:
    """The archive partition of `table` starting at `start` (UTC, ``YYMMDDHHMM``).

    >>> archive_partition_name("jobs", "2612060000")
    'jobs_archive_2612060000'
    """
    return f"{archive_table_name(table)}_{start}"


def counts_table(table: str) -> str:
    """The counters of `table`: jobs ended per minute, queue, kind and status."""
    return f"sa_jobqueue_counts_{table}"[:IDENTIFIER_MAX]


def ended_table(table: str) -> str:
    """The log of `table`'s ended jobs not yet added to `counts_table` (one row per job)."""
    return f"sa_jobqueue_ended_{table}"[:IDENTIFIER_MAX]
