"""Child jobs, as an operator sees them: the jobs a job spawned, the jobs it waits for.

`spawned_children` lists what ``ctx.spawn`` recorded for a job (the dashboard's job page
and its workflow graph); `awaited_children` names the jobs parents wait for with
``ctx.wait_for_job`` (`ops.admin.cancel` cancels them with their parent). Plain reads.
See docs/durable.md ("Child jobs").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.statements.steps import jobs_by_id, spawned_by, waits_for_jobs

__all__ = ["SpawnedChild", "awaited_children", "spawned_children"]


@dataclass(frozen=True, slots=True)
class SpawnedChild:
    """A job that another spawned (``ctx.spawn``).

    Attributes:
        name: the spawn's name (a step name of the parent).
        id: the child's id.
        kind: its kind (None: the child was deleted since).
        status: its status (None: deleted).
    """

    name: str
    id: int
    kind: str | None
    status: str | None


def _decoded(value: Any) -> int:
    """A spawn's recorded result (a JSON number; text on a driver that returns it raw)."""
    return int(json.loads(value) if isinstance(value, str) else value)


def spawned_children(
    conn: Connection,
    model: type[JobMixin],
    job_id: int,
    spawns: Sequence[tuple[str, Any]] | None = None,
) -> list[SpawnedChild]:
    """The jobs `job_id` spawned, in the order it spawned them.

    `spawns`: its ``(name, result)`` spawn rows when the caller read them already (the
    dashboard's job page reads every step row once); else they are read here.
    """
    if spawns is None:
        spawns = [tuple(row) for row in conn.execute(spawned_by(model), {"job_id": job_id})]
    pairs = [(name, _decoded(result)) for name, result in spawns]
    if not pairs:
        return []
    rows = conn.execute(jobs_by_id(model), {"child_ids": [child for _, child in pairs]})
    found = {row.id: (row.kind, row.status) for row in rows}
    return [SpawnedChild(name, child, *found.get(child, (None, None))) for name, child in pairs]


def awaited_children(
    conn: Connection, model: type[JobMixin], parent_ids: Sequence[int]
) -> list[int]:
    """The jobs that the jobs `parent_ids` are parked waiting for (``ctx.wait_for_job``), by id."""
    if not parent_ids:
        return []
    rows = conn.execute(waits_for_jobs(model), {"parent_ids": list(parent_ids)})
    ids = {
        int(name.removeprefix("job:")) for _, name in rows if name.removeprefix("job:").isdigit()
    }
    return sorted(ids)
