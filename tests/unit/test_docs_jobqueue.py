"""The application API page renders all of `JobQueue`, its enqueue half included.

`JobQueue` takes `enqueue`, `batch` and `signal` from `EnqueueAPI`
(`sa_jobqueue.enqueue.api`), their asyncio twins from `AsyncEnqueueAPI`
(`sa_jobqueue.enqueue.api_async`), `wait` and `wait_async` from `WaitAPI`
(`sa_jobqueue.ops.waiting`), and `rerun` from `RerunAPI` (`sa_jobqueue.ops.rerun`).
docs/reference/api.md names them in ``inherited_members`` so that they render under
`JobQueue`, at the anchors they have always had; a method added to either and not to
that list would be missing from the page.
"""

from __future__ import annotations

import re
from pathlib import Path

from sa_jobqueue.enqueue.api import EnqueueAPI
from sa_jobqueue.enqueue.api_async import AsyncEnqueueAPI
from sa_jobqueue.jobqueue import JobQueue
from sa_jobqueue.ops.rerun import RerunAPI
from sa_jobqueue.ops.waiting import WaitAPI

API_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "api.md"


def test_the_api_page_renders_every_public_method_of_the_enqueue_and_wait_halves():
    listed = re.search(r"inherited_members: \[([^\]]*)\]", API_PAGE.read_text())
    assert listed is not None, "docs/reference/api.md lists no inherited_members"
    names = {name.strip() for name in listed.group(1).split(",")}
    halves = (EnqueueAPI, AsyncEnqueueAPI, WaitAPI, RerunAPI)
    public = {name for api in halves for name in vars(api) if name[0] != "_"}
    assert names == public
    assert EnqueueAPI in JobQueue.__mro__
    assert AsyncEnqueueAPI in JobQueue.__mro__
    assert WaitAPI in JobQueue.__mro__
    assert RerunAPI in JobQueue.__mro__
