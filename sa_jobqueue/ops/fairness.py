"""Weights of fair claims: how many turns a ``concurrency_key`` gets in a fair kind's claims.

A key without a row has weight 1; `set_weight` stores another (a paying tier), in the
caller's transaction, and the next fair claim of any worker uses it. See
docs/flow-control.md ("Fair claims").
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from sa_jobqueue.core.limits import MAX_LIMIT, check_concurrency_key
from sa_jobqueue.errors import ValidationError
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.statements import fair_weights as fairness

__all__ = ["set_weight", "weights"]


def set_weight(session: Session, model: type[JobMixin], key: object, weight: object) -> None:
    """Give `key` `weight` turns per round in fair claims (1 removes its row); never commits."""
    name = check_concurrency_key(key, None)
    if name is None:
        raise ValidationError("key", key, "must be a concurrency_key (a non-empty str)")
    if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= MAX_LIMIT:
        raise ValidationError("weight", weight, "must be an int of at least 1")
    if weight == 1:
        session.execute(fairness.delete_weight(model), {"weight_key": name})
    else:
        session.execute(fairness.set_weight(model), {"weight_key": name, "weight": weight})


def weights(session: Session, model: type[JobMixin]) -> dict[str, int]:
    """Every key whose weight is not 1, with its weight."""
    return {row.key: row.weight for row in session.execute(fairness.weights(model))}
