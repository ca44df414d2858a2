"""The ``sa-jobqueue`` command line: thin over the library.

`main` is the click group (`sa_jobqueue.cli.app`); importing this package
registers its commands: ``migrate`` and ``worker`` (`sa_jobqueue.cli.run`) and
the operator commands (`sa_jobqueue.cli.ops`), pause/resume/periodic
(`sa_jobqueue.cli.control`), and ``dashboard`` (`sa_jobqueue.cli.dashboard`). See docs/cli.md.
"""

from __future__ import annotations

from sa_jobqueue.cli import (  # noqa: F401 - importing them registers their commands
    control,
    dashboard,
    ops,
    run,
)
from sa_jobqueue.cli.app import main

__all__ = ["main"]
