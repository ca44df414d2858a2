"""The docs stay true to the code.

The API reference (docs/reference/*.md) is generated from the docstrings by mkdocstrings
directives (``::: sa_jobqueue.module``); `make docs` renders it in strict mode. These
tests check, without building the site, that every name in every module's ``__all__`` is
rendered by a directive, that each public class and function has a docstring to render,
and that every page is in the site's navigation.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import pytest

import sa_jobqueue

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"
DIRECTIVE = re.compile(r"^::: *(sa_jobqueue[\w.]*)\s*$", re.MULTILINE)

# The click commands are rendered by the mkdocs-click directive in reference/cli.md.
CLICK_COMMAND_MODULES = {
    "sa_jobqueue.cli.ops",
    "sa_jobqueue.cli.stats",
    "sa_jobqueue.cli.repair",
    "sa_jobqueue.cli.prune",
    "sa_jobqueue.cli.enqueue",
    "sa_jobqueue.cli.run",
    "sa_jobqueue.cli.control",
    "sa_jobqueue.cli.schedules",
    "sa_jobqueue.cli.sql",
    "sa_jobqueue.cli.dashboard",
    "sa_jobqueue.cli.history",
}


def _modules() -> list[str]:
    found = ["sa_jobqueue"]
    for info in pkgutil.walk_packages(sa_jobqueue.__path__, "sa_jobqueue."):
        if not info.name.endswith("__main__"):  # running it is its only job
            found.append(info.name)
    return sorted(found)


MODULES = _modules()


def _directives() -> list[str]:
    pages = sorted(REFERENCE.glob("*.md"))
    return [target for page in pages for target in DIRECTIVE.findall(page.read_text())]


def _resolve(target: str) -> tuple[ModuleType | None, object]:
    """``sa_jobqueue.x`` -> (the module, the module); ``sa_jobqueue.x.Name`` -> (None, Name)."""
    try:
        module = importlib.import_module(target)
    except ModuleNotFoundError:
        parent, _, name = target.rpartition(".")
        return None, getattr(importlib.import_module(parent), name)
    return module, module


def _rendered() -> set[int]:
    """The ids of the objects the reference renders (a module renders its ``__all__``)."""
    rendered: set[int] = set()
    for target in _directives():
        module, obj = _resolve(target)
        rendered.add(id(obj))
        if module is not None:
            rendered.update(id(getattr(module, name)) for name in getattr(module, "__all__", []))
    return rendered


def test_every_directive_names_an_importable_object():
    for target in _directives():
        _resolve(target)  # raises on a typo, before the docs build would


@pytest.mark.parametrize("module", MODULES)
def test_every_exported_name_is_in_the_reference(module):
    imported = importlib.import_module(module)
    exported = getattr(imported, "__all__", [])
    if module in CLICK_COMMAND_MODULES:
        cli = (REFERENCE / "cli.md").read_text()
        assert ":module: sa_jobqueue.cli" in cli
        assert ":list_subcommands: true" in cli
        group = importlib.import_module("sa_jobqueue.cli").main
        commands = {name.replace("_", "-") for name in exported}  # alembic_revision
        assert commands <= set(group.commands), f"{module}: not all commands are in the group"
        return
    rendered = _rendered()
    missing = [name for name in exported if id(getattr(imported, name)) not in rendered]
    assert not missing, (
        f"{module}: {missing} are rendered by no directive in docs/reference/*.md; "
        f"add '::: {module}' to the page of its layer"
    )


@pytest.mark.parametrize("module", MODULES)
def test_every_public_class_and_function_has_a_docstring(module):
    imported = importlib.import_module(module)
    undocumented = [
        name
        for name in getattr(imported, "__all__", [])
        if (inspect.isclass(obj := getattr(imported, name)) or inspect.isfunction(obj))
        and obj.__module__.startswith("sa_jobqueue")
        and not (obj.__doc__ or "").strip()
    ]
    assert not undocumented, f"{module}: {undocumented} have no docstring"
    assert (imported.__doc__ or "").strip(), f"{module} has no module docstring"


def _nav_pages() -> set[str]:
    text = (ROOT / "mkdocs.yml").read_text()
    nav = text[text.index("\nnav:") :]
    return set(re.findall(r"([\w./-]+\.md)\s*$", nav, re.MULTILINE))


def test_every_page_is_in_the_navigation():
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    missing = sorted(pages - _nav_pages())
    assert not missing, f"add these pages to the nav of mkdocs.yml: {missing}"
    gone = sorted(_nav_pages() - pages)
    assert not gone, f"mkdocs.yml's nav names pages that do not exist: {gone}"


def test_every_docs_page_the_readme_links_exists():
    readme = (ROOT / "README.md").read_text()
    for link in re.findall(r"\]\((docs/[^)#]+)\)", readme):
        assert (ROOT / link).is_file(), link
