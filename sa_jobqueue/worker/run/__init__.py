"""Running one claimed attempt: the executor, the thread and event-loop pools, interrupts.

The claim side (loop, claimer, driver, completer) is one folder up. See
docs/architecture.md.
"""
