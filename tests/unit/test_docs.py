"""The docs stay true to the code: every exported name is documented somewhere."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import sa_jobqueue

ROOT = Path(__file__).resolve().parents[2]
DOCS = "\n".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))
MODULES = sorted(m.name for m in pkgutil.iter_modules(sa_jobqueue.__path__))


@pytest.mark.parametrize("module", MODULES)
def test_every_exported_name_appears_in_the_docs(module):
    exported = getattr(importlib.import_module(f"sa_jobqueue.{module}"), "__all__", [])
    missing = [name for name in exported if not re.search(rf"\b{re.escape(name)}\b", DOCS)]
    assert not missing, f"sa_jobqueue.{module}: {missing} are not in docs/"


def test_every_docs_page_the_readme_links_exists():
    readme = (ROOT / "README.md").read_text()
    for link in re.findall(r"\]\((docs/[^)#]+)\)", readme):
        assert (ROOT / link).is_file(), link
