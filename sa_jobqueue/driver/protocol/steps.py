"""`StepOps`: the driver's operations for steps, progress, sleeps, signals, waits.

What ``ctx.step``, ``ctx.sleep``, ``ctx.wait_for_signal``, ``ctx.progress`` and
``jobs.signal`` do to the database. Every write of an attempt is fenced by its
`StepFence` (the job, its attempt, the worker leasing it, the job ``running``): a stale
attempt writes nothing and learns it from the return value. A park (a sleep, a wait) makes
the job ``pending`` again with a later ``run_at`` and gives the attempt back, so the claim
path is the same for a woken job as for any other. See sa_jobqueue/driver/base.py for what
every operation shares (the caller's transaction, never committing) and docs/durable.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import Connection

__all__ = [
    "ProgressSet",
    "SignalSend",
    "SignalSent",
    "SignalTaken",
    "SleepPark",
    "StepFence",
    "StepOps",
    "StepRecord",
    "WaitPark",
    "WaitResolve",
]


@dataclass(frozen=True, slots=True)
class StepFence:
    """One attempt of one job, as leased to one worker: what every step write is fenced by."""

    job_id: int
    attempt: int
    owner: str


@dataclass(frozen=True, slots=True)
class StepRecord:
    """A step's result to record (`StepOps.step_record`).

    Attributes:
        fence: the attempt recording it.
        name: the step's name (unique per job).
        result: its result, as JSON text (None: SQL NULL).
        lock_job: fence by locking the job's row (lease mode: it also marks the job
            ``has_steps``); False fences by a plain read, leaving the row unlocked for
            the rest of a transactional handler's own transaction.
        kind: the row's kind: ``step`` (a step's result), or ``try`` (a failed try of
            a step with options, its error as `result`; its name holds a ``#``, which
            no step name does), or ``patch`` (a ``ctx.patched`` marker's answer,
            ``true`` or ``false``; fenced like a step), or ``spawn`` (a ``ctx.spawn``'s
            child id, recorded in the transaction that inserts the child).
        marked: the job's row is marked ``has_steps`` already (an earlier record of the
            job did it): with `lock_job`, a driver may then lock the row without
            writing it again.
    """

    fence: StepFence
    name: str
    result: str | None
    lock_job: bool = True
    kind: str = "step"
    marked: bool = False


@dataclass(frozen=True, slots=True)
class ProgressSet:
    """A progress value to store (`StepOps.progress_set`).

    Attributes:
        fence: the attempt reporting it.
        value: the value, as JSON text.
        skip_locked: skip the job's row when another transaction holds it (the handler
            never waits for a progress write); False waits (the attempt's last value,
            in its own transaction).
    """

    fence: StepFence
    value: str
    skip_locked: bool = True


@dataclass(frozen=True, slots=True)
class SleepPark:
    """A sleep to park an attempt for (`StepOps.job_park_sleep`)."""

    fence: StepFence
    name: str
    seconds: float


@dataclass(frozen=True, slots=True)
class WaitPark:
    """A signal wait to park an attempt on (`StepOps.job_park_wait`).

    `timeout`: seconds from the wait's first park (None: the job waits for the
    signal however long it takes).
    """

    fence: StepFence
    name: str
    timeout: float | None


@dataclass(frozen=True, slots=True)
class WaitResolve:
    """A wait that took its signal, to record (`StepOps.wait_resolve`).

    `payload`: the signal's payload as JSON text (None: it had none). `kind`: the
    row's kind, ``signal``, or ``child`` (``ctx.wait_for_job``: `payload` is how the
    job it waited for ended).
    """

    fence: StepFence
    name: str
    payload: str | None
    kind: str = "signal"


@dataclass(frozen=True, slots=True)
class SignalTaken:
    """The signal a wait took (`StepOps.signal_take`): its payload, decoded (None: none)."""

    payload: Any


@dataclass(frozen=True, slots=True)
class SignalSend:
    """A signal to send (`StepOps.signal_send`): its payload as JSON text (None: none)."""

    job_id: int
    name: str
    payload: str | None


@dataclass(frozen=True, slots=True)
class SignalSent:
    """What `StepOps.signal_send` did.

    Attributes:
        signal_id: the new signal's id; None when it was refused (no such job, or the
            job has ended).
        status: the job's status as it was locked (None: no job has that id).
    """

    signal_id: int | None
    status: str | None


class StepOps(Protocol):
    """The driver's operations of this family; each says the guarantee it keeps."""

    def attempt_lock(self, conn: Connection, fence: StepFence) -> bool:
        """Lock the job's row for `fence`'s attempt until COMMIT, fenced; False: lease lost.

        A signal wait's first operation: `signal_send` locks the same row before it
        inserts, so a signal committed before it is seen by what follows it in this
        transaction, and one committed after it finds the job parked and wakes it.
        Marks the job ``has_steps``. One round trip.
        """
        ...

    def job_park_sleep(self, conn: Connection, params: SleepPark) -> datetime | None:
        """Park the attempt for ``params.seconds`` and record sleep ``params.name``, fenced.

        The job is ``pending``, due at the database's now plus the delay, with its
        attempt given back, and the sleep's row says until when; or (lease lost)
        neither changes and it returns None. Returns the sleep's end. One round trip.
        """
        ...

    def job_park_wait(self, conn: Connection, params: WaitPark) -> bool:
        """Park the attempt until signal ``params.name`` arrives or its timeout, fenced.

        The wait's row is made by its first park (the timeout counts from then; a
        later park of a later attempt keeps it). The job is ``pending`` with its
        attempt given back, due at the timeout, or never by itself (no timeout) until
        `signal_send` wakes it. False: the lease was lost and nothing changed. One
        round trip.
        """
        ...

    def job_wake_sleeping(self, conn: Connection, job_id: int) -> bool:
        """Make ``pending`` job `job_id` due now (``testing.drain(..., skip_sleeps=True)``).

        False: it is not ``pending`` (nothing changed).
        """
        ...

    def progress_set(self, conn: Connection, params: ProgressSet) -> bool:
        """Store ``params.value`` as the job's ``progress``, fenced; False: not written.

        Not written: the lease was lost, or (``skip_locked``) another transaction
        holds the job's row; it never waits for that row unless not ``skip_locked``.
        One round trip.
        """
        ...

    def signal_send(self, conn: Connection, params: SignalSend) -> SignalSent:
        """Lock the job's row, insert the signal, and wake the job if it is parked on it.

        Refused (no signal inserted, ``signal_id`` None) when no job has that id or it
        has ended (``done``, ``failed``, ``cancelled``). A job parked waiting for
        ``params.name`` is made due now and its queue's workers notified, at the
        caller's COMMIT (a rollback sends nothing). The lock orders it against the
        job's own wait (`attempt_lock`): whichever commits second sees the other.
        """
        ...

    def signal_take(self, conn: Connection, job_id: int, name: str) -> SignalTaken | None:
        """Take the oldest signal `name` of `job_id` not taken yet; None: there is none.

        Each signal is taken once: a taken one is marked consumed (kept, with when).
        One round trip.
        """
        ...

    def steps_recorded(self, conn: Connection, job_id: int) -> dict[str, tuple[str, Any]]:
        """Every step row of `job_id`: name -> ``(kind, result)`` (an attempt's preload).

        Whatever attempt recorded them: a later attempt replays their results.
        """
        ...

    def step_record(self, conn: Connection, params: StepRecord) -> bool:
        """Record step ``params.name`` with its result, fenced; False: lease lost, nothing written.

        One round trip, whether it locks the job's row (``lock_job``) or reads it. The
        row has ``params.kind`` (``step`` or ``try``); a try is recorded with
        ``lock_job`` False.
        """
        ...

    def wait_resolve(self, conn: Connection, params: WaitResolve) -> None:
        """Record wait ``params.name`` as having received its signal, with its payload.

        Made or replaced (an open wait of an earlier park becomes received). Not
        fenced itself: run it after `attempt_lock` and `signal_take`, in their
        transaction.
        """
        ...

    def wait_time_out(self, conn: Connection, fence: StepFence, name: str) -> bool:
        """Record open wait `name` as timed out if its timeout has passed; whether it did.

        Not fenced itself: run it after `attempt_lock`, in its transaction. A wait
        without a timeout, or one not yet due, is left as it is (False).
        """
        ...
