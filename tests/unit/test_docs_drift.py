"""Docs that cannot drift (issue 41, item 7): what the pages name exists in the code.

Every revision id (``sajq_NNNN``) is a shipped revision, and what the tools print or write
about the latest revision names the head; the upgrade table of docs/migrations.md lists
every shipped revision; every ``sa-jobqueue`` flag is an option of the command it is
given to; every ``jobs.NAME(``, ``ctx.NAME`` and ``sa_jobqueue.dotted.name`` exists; and
every keyword given to ``@jobs.task``, ``jobs.worker`` and ``jobs.enqueue`` is a
parameter of theirs.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_type_hints

import click
import pytest

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.cli import main

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
REVISIONS = sorted(
    match.group(1)
    for path in (ROOT / "alembic" / "versions").glob("sajq_*.py")
    if (match := re.match(r"(sajq_\d{4})_", path.name))
)
HEAD = REVISIONS[-1]


def lines() -> Iterator[tuple[str, str]]:
    """(``page:line``, text) of every line of every page."""
    for page in PAGES:
        for number, text in enumerate(page.read_text().splitlines(), 1):
            yield f"{page.relative_to(ROOT)}:{number}", text


def test_every_revision_id_the_docs_name_is_shipped():
    unknown = [
        (where, found)
        for where, text in lines()
        for found in re.findall(r"\bsajq_\d{4}\b", text)
        if found not in REVISIONS
    ]
    assert unknown == []


# What `alembic-revision` writes and `migrate` prints when it brings a table to the head.
_AT_HEAD = re.compile(
    r"_to_(sajq_\d{4})\.py"
    r"|upgrade_to\(['\"](sajq_\d{4})['\"], table="
    r"|(?:created|adopted) table \w+\s+at\s+(sajq_\d{4})"
    r"|from (?:base|sajq_\d{4})\s+to\s+(sajq_\d{4})"
    r"|brings\s+table \w+ to (sajq_\d{4})\s+already"
    r"|already at\s+the latest revision \((sajq_\d{4})\)"
)


def test_what_the_tools_write_at_the_head_names_the_head():
    text = "\n".join(page.read_text() for page in PAGES)
    stale = sorted(
        {found for match in _AT_HEAD.finditer(text) for found in match.groups() if found}
    )
    assert stale in ([], [HEAD]), f"the examples say {stale}; the tools write {HEAD}"


def test_the_upgrade_table_lists_every_shipped_revision():
    page = (ROOT / "docs" / "migrations.md").read_text()
    section = page.split("## Upgrading sa-jobqueue", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `(sajq_\d{4})` \|", section, re.MULTILINE)
    assert listed == REVISIONS


def _commands(group: click.Command, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    found = {path: group}
    if isinstance(group, click.Group):
        for name, command in group.commands.items():
            found.update(_commands(command, (*path, name)))
    return found


COMMANDS = _commands(main)


def _options(command: click.Command) -> set[str]:
    names = {"--help", "-h"}
    for param in command.params:
        names.update(param.opts + param.secondary_opts)
    return names


ALL_OPTIONS = set().union(*(_options(command) for command in COMMANDS.values()))


def test_every_flag_given_to_sa_jobqueue_is_an_option_of_its_command():
    wrong = []
    for where, text in lines():
        for span in re.findall(r"sa-jobqueue((?: [a-z][\w-]*)+[^`\n|]*)", text):
            words = span.split()
            path: tuple[str, ...] = ()
            while words and (*path, words[0]) in COMMANDS:
                path = (*path, words.pop(0))
            options = _options(COMMANDS[path])
            flags = re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", " ".join(words))
            wrong += [(where, " ".join(path), f) for f in flags if f not in options]
    assert wrong == []


def test_every_flag_of_the_cli_pages_option_tables_exists():
    wrong = [
        (where, flag)
        for where, text in lines()
        if text.startswith("| `--")
        for flag in re.findall(r"^\| `(--[a-z][\w-]*)", text)
        if flag not in ALL_OPTIONS
    ]
    assert wrong == []


_CONTEXT = set(dir(JobContext)) | {f.name for f in dataclasses.fields(JobContext)}


def test_every_jobs_method_and_ctx_attribute_the_docs_name_exists():
    missing = [
        (where, f"jobs.{name}")
        for where, text in lines()
        for name in re.findall(r"\bjobs\.([a-z_]+)\(", text)
        if not hasattr(JobQueue, name)
    ]
    missing += [
        (where, f"ctx.{name}")
        for where, text in lines()
        for name in re.findall(r"\bctx\.([a-z_]+)\b", text)
        if name not in _CONTEXT
    ]
    assert missing == []


# The names the code writes as strings (span attributes, events): names it uses too.
_STRINGS = "\n".join(p.read_text() for p in (ROOT / "sa_jobqueue").rglob("*.py"))


def _resolves(dotted: str) -> bool:
    if f'"{dotted}"' in _STRINGS:
        return True
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def test_every_dotted_sa_jobqueue_name_the_docs_name_exists():
    missing = [
        (where, dotted)
        for where, text in lines()
        for dotted in re.findall(r"\bsa_jobqueue(?:\.[A-Za-z_]\w*)+", text)
        if not _resolves(dotted)
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("call", "function"),
    [("@jobs.task(", JobQueue.task), ("jobs.worker(", JobQueue.worker)],
)
def test_every_keyword_the_docs_give_a_call_is_a_parameter_of_it(call, function):
    parameters = set(inspect.signature(function).parameters)
    if "options" in parameters:  # **options: Unpack[TypedDict]
        hint = inspect.signature(function).parameters["options"].annotation
        typed = re.search(r"Unpack\[(\w+)\]", str(hint))
        assert typed is not None, hint
        parameters |= set(get_type_hints(getattr(inspect.getmodule(function), typed[1])))
    text = "\n".join(page.read_text() for page in PAGES)
    wrong = []
    for start in (m.end() for m in re.finditer(re.escape(call), text)):
        depth, end = 1, start
        while end < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        arguments = text[start : end - 1]
        if "..." in arguments.replace(", ...", ""):
            continue  # a sketch (`jobs.worker(...)`), not a call
        flat = re.sub(r"\([^()]*\)|\[[^\[\]]*\]|\{[^{}]*\}", "", arguments)
        wrong += [
            k for k in re.findall(r"(?:^|,)\s*([a-z_]\w*)\s*=(?!=)", flat) if k not in parameters
        ]
    assert sorted(set(wrong)) == []
