"""The shipped Alembic migration: where its scripts are, and the op-level helpers they call.

`scripts` runs the library's own revisions, `ops` holds the helpers every revision calls,
`versions` lists the shipped revisions for the app's own history (`upgrade_to`), and
`preflight` checks a live database; names load on first use, so a worker that imports
`preflight` never loads Alembic. See docs/migrations.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sa_jobqueue.migration.archive_ops import add_archive, drop_archive
    from sa_jobqueue.migration.autogenerate import include_object
    from sa_jobqueue.migration.counter_ops import add_counters, drop_counters
    from sa_jobqueue.migration.function_ops import add_enqueue_function, drop_enqueue_function
    from sa_jobqueue.migration.ops import (
        add_flow_control,
        add_workflows,
        drop_flow_control,
        drop_workflows,
        revision_table,
    )
    from sa_jobqueue.migration.registry_ops import add_worker_registry, drop_worker_registry
    from sa_jobqueue.migration.runtime_ops import add_runtime_control, drop_runtime_control
    from sa_jobqueue.migration.schedule_ops import (
        add_schedules_due_index,
        drop_schedules_due_index,
    )
    from sa_jobqueue.migration.scripts import (
        AUTOVACUUM,
        ROOT_REVISION,
        Migrated,
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
        migrate,
        script_location,
        set_autovacuum,
        upgrade,
        version_table,
        versions_location,
    )
    from sa_jobqueue.migration.status_index_ops import (
        add_pending_index_status,
        add_running_index_status,
        drop_pending_index_status,
        drop_running_index_status,
    )
    from sa_jobqueue.migration.steps_ops import add_durable_steps, drop_durable_steps
    from sa_jobqueue.migration.versions import downgrade_to, revision_of, upgrade_to

__all__ = [
    "AUTOVACUUM",
    "ROOT_REVISION",
    "Migrated",
    "add_archive",
    "add_counters",
    "add_durable_steps",
    "add_enqueue_function",
    "add_flow_control",
    "add_pending_index_status",
    "add_revision_columns",
    "add_running_index_status",
    "add_runtime_control",
    "add_schedules_due_index",
    "add_scheduling",
    "add_worker_registry",
    "add_workflows",
    "channel_name",
    "check_identifier",
    "check_table_name",
    "create_jobs_table",
    "create_notify_trigger",
    "current_revisions",
    "downgrade",
    "downgrade_to",
    "drop_archive",
    "drop_counters",
    "drop_durable_steps",
    "drop_enqueue_function",
    "drop_flow_control",
    "drop_jobs_table",
    "drop_notify_trigger",
    "drop_pending_index_status",
    "drop_revision_columns",
    "drop_running_index_status",
    "drop_runtime_control",
    "drop_schedules_due_index",
    "drop_scheduling",
    "drop_worker_registry",
    "drop_workflows",
    "include_object",
    "jobs_table",
    "latest",
    "lock_migrations",
    "migrate",
    "revision_of",
    "revision_table",
    "script_location",
    "set_autovacuum",
    "upgrade",
    "upgrade_to",
    "version_table",
    "versions_location",
]

_OPS = frozenset(
    {"add_flow_control", "drop_flow_control"}
    | {"add_workflows", "drop_workflows", "revision_table"}
)
_RUNTIME = frozenset({"add_runtime_control", "drop_runtime_control"})
_VERSIONS = frozenset({"downgrade_to", "revision_of", "upgrade_to"})
_DURABLE = frozenset({"add_durable_steps", "drop_durable_steps"})
_REGISTRY = frozenset({"add_worker_registry", "drop_worker_registry"})
_SCHEDULES = frozenset({"add_schedules_due_index", "drop_schedules_due_index"})
_FUNCTIONS = frozenset({"add_enqueue_function", "drop_enqueue_function"})
_AUTOGENERATE = frozenset({"include_object"})
_ARCHIVE = frozenset({"add_archive", "drop_archive"})
_COUNTERS = frozenset({"add_counters", "drop_counters"})
_STATUS_INDEXES = frozenset(
    {
        "add_pending_index_status",
        "drop_pending_index_status",
        "add_running_index_status",
        "drop_running_index_status",
    }
)
#: The module of each name not in `scripts`.
_MODULES = {
    "ops": _OPS,
    "versions": _VERSIONS,
    "steps_ops": _DURABLE,
    "registry_ops": _REGISTRY,
    "schedule_ops": _SCHEDULES,
    "function_ops": _FUNCTIONS,
    "runtime_ops": _RUNTIME,
    "autogenerate": _AUTOGENERATE,
    "archive_ops": _ARCHIVE,
    "counter_ops": _COUNTERS,
    "status_index_ops": _STATUS_INDEXES,
}


def __getattr__(name: str) -> Any:
    """Load a name of the migration surface on first use (Alembic with it)."""
    if name in __all__:
        module = next((m for m, names in _MODULES.items() if name in names), "scripts")
        return getattr(importlib.import_module(f"sa_jobqueue.migration.{module}"), name)
    raise AttributeError(f"module 'sa_jobqueue.migration' has no attribute {name!r}")
