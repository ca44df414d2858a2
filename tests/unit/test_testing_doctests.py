"""The doctests of sa_jobqueue.testing's pure helpers run."""

from __future__ import annotations

import doctest

from sa_jobqueue.testing import assertions


def test_assertions_doctests_pass():
    result = doctest.testmod(assertions)
    assert result.attempted >= 3
    assert result.failed == 0
