"""The parameters of the fenced statements: which attempts, of which owner.

Every change after a claim names its attempts by ``ids`` and ``attempt_numbers`` (and
``owner``); `fence_literals` sends each array as one text literal, cheaper to send.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sa_jobqueue.driver.values import Claimed

__all__ = ["fence_literals", "fence_params"]


def fence_params(jobs: Iterable[Claimed], owner: str) -> dict[str, Any]:
    """The parameters of a batched fenced statement (``ids``, ``attempt_numbers``, ``owner``)."""
    jobs = list(jobs)
    return {
        "ids": [job.id for job in jobs],
        "attempt_numbers": [job.attempts for job in jobs],
        "owner": owner,
    }


def fence_literals(jobs: Sequence[Claimed], owner: str) -> dict[str, Any]:
    """`fence_params` with each array as its text, ``'{1,2}'`` (`completion.complete`).

    One string for the driver to send per array, where a list costs it a dump of
    each element.
    """
    ids = ",".join(map(str, [job.id for job in jobs]))
    attempts = ",".join(map(str, [job.attempts for job in jobs]))
    return {"ids": f"{{{ids}}}", "attempt_numbers": f"{{{attempts}}}", "owner": owner}
