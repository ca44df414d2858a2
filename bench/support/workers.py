"""Worker processes a scenario starts together: ``ready``, then ``go``, then one JSON report.

A child (``bench/support/drive.py``, or the worker mode of ``limits`` and ``fairness``)
builds its engine and worker, prints ``ready``, waits for a line on stdin, works, and
prints one JSON line. `Workers` starts them all, waits until every one is ready, and times from
the ``go`` it sends them all.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

#: The checkout: children run from it, so ``python -m bench...`` finds the package.
ROOT = Path(__file__).resolve().parents[2]


def module_command(module: str, *args: object) -> list[str]:
    """``python -m module args...`` with this interpreter (run it with ``cwd=ROOT``)."""
    return [sys.executable, "-m", module, *(str(a) for a in args)]


class Workers:
    """Child processes started at once; used as a context manager, which kills leftovers."""

    def __init__(self, commands: list[list[str]]) -> None:
        self.commands = commands
        self.children: list[subprocess.Popen[str]] = []

    def __enter__(self) -> Workers:
        try:
            for command in self.commands:
                self.children.append(
                    subprocess.Popen(
                        command,
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        text=True,
                        cwd=ROOT,
                    )
                )
            for child in self.children:
                assert child.stdout is not None
                line = child.stdout.readline().strip()
                if line != "ready":
                    raise RuntimeError(f"worker process did not start: {line!r}")
        except BaseException:
            self.kill()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.kill()

    def send(self, line: str) -> None:
        """Write `line` to every child's stdin."""
        for child in self.children:
            assert child.stdin is not None
            child.stdin.write(line + "\n")
            child.stdin.flush()

    def go(self) -> float:
        """Tell every child to start; the ``time.monotonic()`` just before."""
        started = time.monotonic()
        self.send("go")
        return started

    def reports(
        self, timeout: float = 60.0, *, report_timeout: float | None = None
    ) -> list[dict[str, Any]]:
        """Each child's JSON report line, then its exit (within `timeout` seconds of now).

        With `report_timeout`, a child whose report has not come that many seconds from
        now is a `RuntimeError` (the context manager then kills them all); without it,
        the reports are awaited however long the work takes.
        """
        deadline = time.monotonic() + timeout
        report_deadline = None if report_timeout is None else time.monotonic() + report_timeout
        found = []
        for child in self.children:
            assert child.stdout is not None
            if report_deadline is not None:
                left = max(0.0, report_deadline - time.monotonic())
                if not select.select([child.stdout], [], [], left)[0]:
                    raise RuntimeError(f"a worker sent no report within {report_timeout:.0f}s")
            line = child.stdout.readline()
            if not line:
                raise RuntimeError("a worker exited without a report (its stderr is in the log)")
            found.append(json.loads(line))
        for child in self.children:
            child.wait(max(1.0, deadline - time.monotonic()))
        return found

    def wait(self, timeout: float = 60.0) -> None:
        """Wait for every child to exit."""
        for child in self.children:
            child.wait(timeout)

    def kill(self) -> None:
        for child in self.children:
            if child.poll() is None:
                child.kill()
                child.wait(10)
