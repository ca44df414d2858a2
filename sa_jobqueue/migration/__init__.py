"""The shipped Alembic migration: where its scripts are, and the op-level helpers they call.

`scripts` finds and runs the library's own revisions (``sa-jobqueue migrate``); `ops`
holds the op-level helpers every revision calls, for a jobs table of any name;
`preflight` checks a live database before migrating it or working on it. Names are
loaded on first use, so a worker that imports `preflight` never loads Alembic. See
docs/migrations.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sa_jobqueue.migration.ops import (
        add_flow_control,
        add_workflows,
        drop_flow_control,
        drop_workflows,
    )
    from sa_jobqueue.migration.scripts import (
        AUTOVACUUM,
        ROOT_REVISION,
        add_revision_columns,
        add_scheduling,
        channel_name,
        check_identifier,
        check_table_name,
        create_jobs_table,
        create_notify_trigger,
        current_revisions,
        downgrade,
        drop_jobs_table,
        drop_notify_trigger,
        drop_revision_columns,
        drop_scheduling,
        jobs_table,
        latest,
        lock_migrations,
        script_location,
        set_autovacuum,
        upgrade,
        version_table,
        versions_location,
    )

__all__ = [
    "AUTOVACUUM",
    "ROOT_REVISION",
    "add_flow_control",
    "add_revision_columns",
    "add_scheduling",
    "add_workflows",
    "channel_name",
    "check_identifier",
    "check_table_name",
    "create_jobs_table",
    "create_notify_trigger",
    "current_revisions",
    "downgrade",
    "drop_flow_control",
    "drop_jobs_table",
    "drop_notify_trigger",
    "drop_revision_columns",
    "drop_scheduling",
    "drop_workflows",
    "jobs_table",
    "latest",
    "lock_migrations",
    "script_location",
    "set_autovacuum",
    "upgrade",
    "version_table",
    "versions_location",
]

_OPS = frozenset({"add_flow_control", "drop_flow_control", "add_workflows", "drop_workflows"})


def __getattr__(name: str) -> Any:
    """Load a name of the migration surface on first use (Alembic with it)."""
    if name in __all__:
        module = "ops" if name in _OPS else "scripts"
        return getattr(importlib.import_module(f"sa_jobqueue.migration.{module}"), name)
    raise AttributeError(f"module 'sa_jobqueue.migration' has no attribute {name!r}")
