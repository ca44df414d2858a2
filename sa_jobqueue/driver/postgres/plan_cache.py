"""How the claims are written so that PostgreSQL plans them once for any run's values.

psycopg prepares a statement on the server after five runs. PostgreSQL then plans it
with each run's values (a custom plan) until the plan built without them (the generic
plan) costs no more than those did on average, and from then on keeps the generic plan.
A statement whose generic plan looks dearer is planned again at every run: 0.3-0.5 ms of
an idle worker's wake-up for the claim. The claims are written so that both plans cost
the same, by PostgreSQL's own estimate, and it settles on the generic plan by itself:
for those statements only, with no session setting of the claim loop's connection. See
docs/scaling.md ("Planned once").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Integer, Select, Text, bindparam, literal_column, select

from sa_jobqueue.core.validation import check_name

__all__ = [
    "MIN_CLAIM_CEILING",
    "claim_ceiling",
    "due_within",
    "unseen_limit",
    "written_limit",
    "written_names",
]

#: The smallest `claim_ceiling`.
MIN_CLAIM_CEILING = 32


def claim_ceiling(limit: int) -> int:
    """The ``ceiling`` of a claim of up to `limit` jobs: a power of two, at least 32.

    >>> [claim_ceiling(n) for n in (1, 32, 33, 160, 1000)]
    [32, 32, 64, 256, 1024]
    """
    return max(MIN_CLAIM_CEILING, 1 << max(0, limit - 1).bit_length())


def unseen_limit() -> Any:
    """``(SELECT :limit)``: a LIMIT the planner cannot see, in a custom plan as in a generic."""
    return select(bindparam("limit", type_=Integer)).scalar_subquery()


def written_limit(ceiling: int) -> Any:
    """`ceiling` written into the SQL as a LIMIT, seen alike by the custom and generic plans.

    A walk inside ``LIMIT ceiling`` is planned for its first `ceiling` rows of however many
    the planner expects; a caller's exact ``:limit`` applies on top (`due_within`).
    """
    if ceiling < 1:
        raise ValueError(f"ceiling must be at least 1, not {ceiling}")
    return literal_column(str(int(ceiling)), Integer)


def due_within(walk: Select[Any], ceiling: int) -> Any:
    """The CTE ``due``: the first ``:limit`` rows of `walk`, inside ``LIMIT ceiling``.

    A bare ``LIMIT :limit`` let a custom plan see ``LIMIT 32`` while the generic plan
    guessed a tenth of the walk, so the generic plan always looked dearer. With
    ``(SELECT :limit)`` alone both guess a tenth, which beside a deep backlog costs
    enough (100,000 due jobs: 153,000 for a claim of four queues) for JIT compilation at
    each run (30-90 ms). `ceiling`, written into the SQL, sizes both plans as a claim of
    that many rows (a cost near 70 with 100 or 1,000,000 jobs); ``:limit``, at most
    `ceiling`, applies on top.
    """
    sized = walk.limit(written_limit(ceiling)).subquery("walk")
    return select(sized.c.id).limit(unseen_limit()).cte("due")


def written_names(field: str, names: Sequence[str]) -> list[ColumnElement[str]]:
    """`names` (kinds, queues) as SQL literals, each checked by `check_name` first.

    Bound, a kind filter is estimated from the column's statistics in a custom plan and
    from a guess in the generic one; written in, both estimate it alike.
    """
    # Names hold only letters, digits and _ . : / - (check_name): safe in a literal.
    return [literal_column(f"'{check_name(field, name)}'", Text) for name in names]
