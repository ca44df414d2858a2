"""The ``sa-jobqueue`` command line: thin over the library.

`main` is the click group (`sa_jobqueue.cli.app`). Its commands live in
`sa_jobqueue.cli.run` (``migrate``, ``worker``), `sa_jobqueue.cli.ops` (the operator
commands), `sa_jobqueue.cli.control` (pause/resume/periodic) and
`sa_jobqueue.cli.dashboard` (``dashboard``); each module is imported when its command
is looked up (`sa_jobqueue.cli.app.SUBCOMMANDS`), so a worker loads only its own.
See docs/cli.md.
"""

from __future__ import annotations

from sa_jobqueue.cli.app import main

__all__ = ["main"]
