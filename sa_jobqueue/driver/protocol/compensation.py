"""`CompensationOps`: a job's compensations, owed when it ends failed for good, then run.

A job that ends ``failed`` or ``cancelled`` with steps that registered a compensation is
not ended at once: `compensations_owe` records that its compensation is owed (a row
``#compensation``) and makes it ``pending`` again, so any worker claims it, runs the
compensations not yet recorded (`compensation_plan`) and ends it with its final status
(`compensation_end`). See docs/durable.md ("Compensation").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Connection

from sa_jobqueue.driver.values import Claimed

__all__ = ["CompensationOps", "CompensationPlan", "Owed"]


@dataclass(frozen=True, slots=True)
class Owed:
    """One compensation to run: step `step`'s, import path `fn`, with the step's `result`."""

    step: str
    fn: str
    result: Any


@dataclass(frozen=True, slots=True)
class CompensationPlan:
    """What a claimed compensating job still has to do (`CompensationOps.compensation_plan`).

    Attributes:
        status: the status it ends with (``failed`` or ``cancelled``).
        owed: the compensations not recorded yet, newest step first.
        done: how many were recorded already (by earlier attempts).
    """

    status: str
    owed: tuple[Owed, ...]
    done: int


class CompensationOps(Protocol):
    """The driver's operations of this family; each says the guarantee it keeps."""

    def compensations_owe(self, conn: Connection, ended: Sequence[int], status: str) -> list[int]:
        """Of `ended` (just ended `status` in this transaction), those now compensating.

        A job with a step that registered a compensation and recorded its result, and
        no ``#compensation`` row yet, gets one (state ``owed``, its final `status` and
        its ``last_error``) and goes back to ``pending``, due now, unlocked, with
        `sa_jobqueue.core.compensation.ATTEMPTS` claims more; its queue is notified at
        COMMIT. Those are returned: they have not ended (release no dependents, wake
        no waiter). A job whose compensation was owed already (it ended while
        compensating: its claims used up, a cancel) has it recorded ``failed``, and
        stays ended. Reads only the steps rows of `ended`.
        """
        ...

    def compensation_plan(self, conn: Connection, job_id: int) -> CompensationPlan | None:
        """What compensating job `job_id` still owes; None when it is not compensating.

        A worker asks only for a job whose recorded steps (`StepOps.steps_recorded`)
        hold a ``#compensation`` row of kind ``compensating``; one read by primary key
        answers for any other.
        """
        ...

    def compensation_end(
        self, conn: Connection, job: Claimed, owner: str, error: str | None
    ) -> str | None:
        """End compensating `job`, fenced, with its final status; return it (None: lease lost).

        Its ``#compensation`` row becomes ``finished`` (`error` None) or ``failed``
        (with `error`), and ``last_error`` is the failure that made it compensate. The
        caller releases its dependents and announces its end in the same transaction.
        """
        ...
