"""A griffe extension for the API reference: doctests render as Python code.

The package's docstrings carry doctests (``>>>`` lines, collected by pytest) outside
Google-style ``Examples:`` sections too, where Markdown would read ``>>>`` as nested
quotes. This wraps each doctest block (from its first ``>>>`` line to the next blank
line) in a ``pycon`` fence and drops ``# doctest:`` flags, before griffe parses the
docstring. mkdocs.yml loads it for mkdocstrings.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_FLAG = re.compile(r"\s*# doctest:.*$")


def fence_doctests(text: str) -> str:
    r"""`text` with each doctest block inside a ``pycon`` code fence.

    >>> fence_doctests("Say:\n\n>>> 1 + 1\n2\n\nDone.").splitlines()
    ['Say:', '', '```pycon', '>>> 1 + 1', '2', '```', '', 'Done.']
    """
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.lstrip().startswith(">>>"):
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(line.lstrip())]
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(_FLAG.sub("", lines[i]))
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Fence the doctests of every docstring griffe loads."""

    def on_instance(self, *, node: Any, obj: griffe.Object, agent: Any, **kwargs: Any) -> None:
        """Rewrite `obj`'s docstring before it is parsed."""
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
