"""Enqueue: the checks and `JobSpec` (`prepare`), then the INSERTs (`insert`, `insert_many`).

Both run in the caller's session and transaction, never committing and never
opening one of their own; `JobQueue`'s enqueue methods over them are in `api`.
See docs/enqueue.md.
"""
