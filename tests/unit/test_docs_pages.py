"""The tested pages are well formed, and examples/ holds exactly the files they write.

tests/acceptance/test_docs_pages.py runs the pages; this checks, without a database,
what a page must be for that run to mean something.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import docs_pages

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted(p for p in (ROOT / "docs" / "recipes").glob("*.md") if p.name != "index.md")
PAGES = [ROOT / "docs" / "getting-started.md", *RECIPES]


def example_dir(page: Path) -> str:
    """examples/getting-started/, examples/recipe-flask/, ...: never an importable name
    (examples/flask/ would pass for the flask package to ruff's import sorting)."""
    return page.stem if page.parent.name == "docs" else f"recipe-{page.stem}"


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_every_python_and_shell_block_is_run_or_written(page):
    roles = [block.role for block in docs_pages.parse(page)]  # raises on a block it cannot run
    assert "shell" in roles
    assert roles.count("background") >= 1, f"{page.name} ends with no worker processing a job"


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_the_example_directory_is_the_pages_files(page):
    written = docs_pages.files(docs_pages.parse(page))
    example = ROOT / "examples" / example_dir(page)
    kept = {
        str(p.relative_to(example)): p.read_text()
        for p in example.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    where = f"examples/{example_dir(page)}"
    assert kept.keys() == written.keys(), f"{where}/ and {page.name} differ in files"
    for name, code in written.items():
        assert kept[name] == code, f"{where}/{name} differs from {page.name}"


def test_a_python_block_without_a_file_name_is_an_error(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Text.\n\n```python\nprint('hi')\n```\n")
    with pytest.raises(ValueError, match=r"page\.md:3: a python block"):
        [block.role for block in docs_pages.parse(page)]


def test_a_marker_applies_to_the_next_block_only(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        '<!-- test: expect="a" expect="b" -->\n```bash\necho a b\n```\n\n'
        "Prose between.\n\n<!-- test: database -->\n\nmore prose\n\n```bash\necho c\n```\n"
    )
    first, second = docs_pages.parse(page)
    assert first.options == {"expect": ["a", "b"]}
    assert first.role == "shell"
    assert second.options == {}
    assert second.role == "shell"
