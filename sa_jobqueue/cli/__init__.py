"""The ``sa-jobqueue`` command line: thin over the library.

`main` is the click group (`sa_jobqueue.cli.app`); the commands live in `cli.run`, `cli.ops`
(jobs), `cli.stats`, `cli.repair` (retry, cancel), `cli.prune`, `cli.enqueue`, `cli.control`,
`cli.schedules`, `cli.history` and `cli.dashboard`, each imported when its command is looked up.
See docs/cli.md.
"""

from __future__ import annotations

from sa_jobqueue.cli.app import main

__all__ = ["main"]
