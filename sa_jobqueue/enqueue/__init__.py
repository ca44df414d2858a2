"""Enqueue: the checks and `JobSpec` (`prepare`), then the INSERTs (`insert`).

Both run in the caller's session and transaction, never committing and never
opening one of their own. See docs/enqueue.md.
"""
