"""How the completer records each way an attempt can end."""

from __future__ import annotations

from sa_jobqueue.worker import completer
from sa_jobqueue.worker.attempt import Result


def test_every_result_is_recorded_by_a_batched_statement_or_by_its_row_of_the_table():
    batched = {Result.DONE, Result.RELEASE}  # `record`'s one complete, its releases by reason
    assert set(completer._BY_RESULT) == set(Result) - batched


def test_every_failure_result_writes_through_record_failure_and_nothing_else_does():
    failures = {
        r for r, note in completer._BY_RESULT.items() if note is completer.Completer._record_failure
    }
    assert failures == set(completer._FAILURES)
