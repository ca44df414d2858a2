"""Payload secrets are masked where they are shown; the value itself never changes."""

from __future__ import annotations

import pytest

from sa_jobqueue import ConfigurationError, JobQueue
from sa_jobqueue.core.redaction import MASK, redact
from tests.support.models import Job


def test_keys_match_as_parts_case_and_separators_ignored():
    payload = {
        "new_password": "p",
        "X-Api-Key": "k",
        "refreshToken": "t",
        "user": {"email": "a@b.c", "credentials": {"user": "u"}},
        "items": [{"card_number": "4111"}, 3],
    }
    assert redact(payload) == {
        "new_password": MASK,
        "X-Api-Key": MASK,
        "refreshToken": MASK,
        "user": {"email": "a@b.c", "credentials": MASK},
        "items": [{"card_number": MASK}, 3],
    }
    assert payload["new_password"] == "p"  # noqa: S105 - a copy: the value is untouched


def test_a_queue_masks_its_own_keys_and_none_when_told():
    assert JobQueue(Job, redact_keys=["ssn"]).redact({"ssn": 1, "password": 2}) == {
        "ssn": MASK,
        "password": 2,
    }
    assert JobQueue(Job, redact_keys=()).redact({"password": 2}) == {"password": 2}


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ("password", "redact_keys must be a list of strings, not 'password'"),
        (["token", ""], "redact_keys: '' is not a non-empty key name"),
        ([3], "redact_keys: 3 is not a non-empty key name"),
    ],
)
def test_bad_redact_keys_are_refused_where_the_queue_is_made(keys, message):
    with pytest.raises(ConfigurationError, match=message):
        JobQueue(Job, redact_keys=keys)
