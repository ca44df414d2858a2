"""The `spawn` fixture of the hardening tests: workers of one app, started by `processes`."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support.processes import Proc, Processes

#: ``spawn(app, *extra, ready=True)``: a worker with a 2 s lease, polling every 0.5 s.
Spawner = Callable[..., Proc]


@pytest.fixture
def spawn(processes: Processes) -> Spawner:
    def start(app: str, *extra: str, ready: bool = True) -> Proc:
        return processes.worker(
            app,
            *("--poll-interval", "0.5", "--sweep-interval", "0.5", *extra),
            concurrency=None,
            env={"SAJQ_LEASE": "2.0"},
            ready=ready,
            ready_timeout=60.0,
        )

    return start
