"""``python -m sa_jobqueue.cli``: the same as the ``sa-jobqueue`` command."""

from __future__ import annotations

from sa_jobqueue.cli import main

main()
