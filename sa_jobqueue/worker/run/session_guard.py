"""Keep a transactional handler from ending its job's transaction (docs/tasks.md).

While a handler runs, ``ctx.session.commit()``, ``rollback()`` and ``close()`` are
refused before they act: each raises `HandlerSessionError`, which says why, and the
attempt fails (even when the handler caught that error), so none of its writes
commit. Nested transactions (``ctx.session.begin_nested()``) stay the handler's own
to commit or roll back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn

from sqlalchemy.orm import Session

__all__ = ["HandlerSessionError", "guarded"]

_CALLS = ("commit", "rollback", "close")

_WHY = (
    "ctx.session.{call}() is refused in a transactional handler: the job's transaction "
    "also carries its done mark, which the worker commits when the handler returns; "
    "the attempt fails and its writes roll back. {advice}"
)
_ADVICE = {
    "commit": "Flush instead (ctx.session.flush()); for writes that must commit on "
    "their own, use a session of your own on ctx.engine.",
    "rollback": "Raise an exception to fail the attempt, or undo part of the work "
    "inside ctx.session.begin_nested().",
    "close": "Leave the session to the worker: it closes it after the done mark.",
}


class HandlerSessionError(RuntimeError):
    """A transactional handler called ``ctx.session.commit()``, ``rollback()`` or ``close()``."""


@contextmanager
def guarded(session: Session) -> Iterator[None]:
    """Refuse `session`'s ``commit``, ``rollback`` and ``close`` while the block runs.

    Each is replaced on the instance for the block's length (the class stays as it
    is, so the worker's own COMMIT after the block is untouched). Raises
    `HandlerSessionError` at the end of the block when one was called, even if the
    handler caught the error it got.
    """
    refused: list[str] = []

    def refuse(call: str) -> Callable[..., NoReturn]:
        def refusal(*args: object, **kwargs: object) -> NoReturn:
            message = _WHY.format(call=call, advice=_ADVICE[call])
            refused.append(message)
            raise HandlerSessionError(message)

        return refusal

    for call in _CALLS:
        setattr(session, call, refuse(call))
    try:
        yield
    finally:
        for call in _CALLS:
            session.__dict__.pop(call, None)
    if refused:
        raise HandlerSessionError(refused[0])
