"""The NOTIFY that tells `jobs.wait` which jobs ended: one per statement that ends jobs.

A statement that ends jobs (``done``, ``failed``, ``cancelled``) runs as a data-modifying
CTE, and an uncorrelated scalar subquery of the SELECT over it sends one ``pg_notify`` on
the table's ended channel (`schema.naming.ended_channel_name`) with the ids of the rows
that ended, space-separated. PostgreSQL delivers it at COMMIT, so only an end that commits
is announced; a statement that ended nothing sends nothing. A transactional handler's
``done`` is the exception: the claim loop announces it in its round, with
``statements.notify`` on the same channel (a NOTIFY in each handler's transaction would
serialise their commits). See docs/durable.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import CTE, Select, Text, Update, case, cast, func, literal, select

__all__ = ["ANY_ENDED", "MAX_NAMED_IDS", "ended_notify", "notifying_ended"]

#: At most this many ids are named in one payload (20 bytes each at most, under
#: PostgreSQL's 8000-byte payload limit); a statement that ended more sends `ANY_ENDED`.
MAX_NAMED_IDS = 350

#: The payload for "jobs ended, too many to name": every waiter reads its row again.
ANY_ENDED = "*"


def ended_notify(channel: str, rows: CTE, *, statuses: Sequence[str] | None = None) -> Select[int]:
    """``count(pg_notify(channel, '<id> <id> ...'))`` over the `rows` that ended: 0 or 1.

    `rows` is a data-modifying CTE returning ``id`` (and ``status`` when `statuses` is
    given: only its rows in `statuses` count, e.g. a failure that was retried did not
    end). Use it as a scalar subquery: PostgreSQL evaluates it once, for the first row
    of the outer query, and not at all when that query returns none.
    """
    ended = select(rows.c.id)
    if statuses is not None:
        ended = ended.where(rows.c.status.in_(list(statuses)))
    ids = ended.subquery("ended_rows")
    named = func.string_agg(cast(ids.c.id, Text), literal(" ", Text))
    payload = case((func.count() <= MAX_NAMED_IDS, named), else_=literal(ANY_ENDED, Text))
    batch = select(payload.label("ids")).select_from(ids).subquery("ended_ids")
    notified = func.count(func.pg_notify(literal(channel, Text), batch.c.ids))
    return select(notified).where(batch.c.ids.is_not(None))


def notifying_ended(
    statement: Update, channel: str, *, statuses: Sequence[str] | None = None
) -> Select[tuple[object, ...]]:
    """`statement` (an ``UPDATE ... RETURNING id, ...``) with one `ended_notify` of its rows.

    Returns the rows `statement` returns, each with one more column, ``ended_notified``;
    PostgreSQL runs a data-modifying CTE to completion whatever its outer query reads.
    """
    rows = statement.cte("ending")
    notified = ended_notify(channel, rows, statuses=statuses)
    return select(*rows.c, notified.scalar_subquery().label("ended_notified"))
