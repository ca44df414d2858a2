"""A progress bar for the long operator commands, drawn only on a terminal.

`progress_bar` is click's own bar (`click.progressbar`) when stdout is a terminal and the
command prints text; otherwise a no-op, so pipes, logs and ``--json`` stay clean.
See docs/cli.md#progress-bars.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

__all__ = ["on_terminal", "progress_bar"]


def on_terminal() -> bool:
    """True when stdout is a terminal (a person watching, not a pipe or a file)."""
    return sys.stdout.isatty()


@contextmanager
def progress_bar(
    length: int, label: str, *, enabled: bool = True
) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)``: a bar of `length` steps on a terminal, a no-op elsewhere.

    No bar when `enabled` is False (``--json``), when stdout is not a terminal, or
    when there is nothing to do (`length` 0). The bar is cleared of nothing: its
    last state (100%) stays on screen above the command's summary line.
    """
    if not enabled or length <= 0 or not on_terminal():
        yield lambda n: None
        return
    with click.progressbar(
        length=length,
        label=label,
        show_eta=True,
        show_percent=True,
        show_pos=True,
        width=32,
        file=sys.stdout,
    ) as bar:
        yield bar.update
