"""Getting started and every recipe, followed literally, as a reader pastes them.

One reader per test session: getting-started.md runs first, in an empty directory beside
a ``sa-jobqueue`` checkout (a link to this tree), and creates the virtualenv with the
package installed from the checkout, not editable. Each recipe then runs in its own
empty directory with that virtualenv active and a database of its own, the way the
recipes index tells a reader to start; and once more in a copy of the database getting
started left, for the reader who kept its DATABASE_URL. The alembic recipe is also
replayed on alembic.ini files as older Alembics wrote them. See tests/support/docs_pages.py
for what each block means.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.pool import NullPool

from sa_jobqueue.testing import scratch_database
from tests.support import docs_pages
from tests.support.pgbouncer import running_pgbouncer

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RECIPES = sorted(p for p in (DOCS / "recipes").glob("*.md") if p.name != "index.md")

pytestmark = pytest.mark.slow


@dataclass
class Reader:
    """Where getting started left its reader: a home with ``shop/.venv`` in it."""

    home: Path
    env: dict[str, str]
    transcript: list[str]
    database: str  # the database getting started used, as it left it


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as stack:
        yield stack


@pytest.fixture
def databases(server_url: str, stack: ExitStack) -> Callable[[], str]:
    """A maker of empty databases, each dropped after the test."""
    return lambda: stack.enter_context(scratch_database(server_url, prefix="sa_jobqueue_docs"))


@pytest.fixture
def pooled(stack: ExitStack) -> Callable[[str], str]:
    """The URL of a database through a real PgBouncer in transaction pooling."""

    def through_pgbouncer(url: str) -> str:
        return stack.enter_context(running_pgbouncer(url)).url("transaction")

    return through_pgbouncer


def _clean_env() -> dict[str, str]:
    """The environment of a new terminal: no virtualenv of ours, no test settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "VIRTUAL_ENV"))}
    env.pop("DATABASE_URL", None)
    ours = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != ours)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="session")
def reader(tmp_path_factory: pytest.TempPathFactory, server_url: str) -> Iterator[Reader]:
    home = tmp_path_factory.mktemp("reader")
    (home / "sa-jobqueue").symlink_to(ROOT, target_is_directory=True)
    shell = docs_pages.Shell(cwd=home, env=_clean_env(), state=home / ".shell")
    page = docs_pages.parse(DOCS / "getting-started.md")
    with ExitStack() as stack:  # its database stays for the session, as the reader's does
        docs_pages.play(
            page,
            shell,
            new_database=lambda: stack.enter_context(
                scratch_database(server_url, prefix="sa_jobqueue_docs")
            ),
        )
        venv = home / "shop" / ".venv"
        assert (venv / "bin" / "sa-jobqueue").is_file()
        env = _clean_env()
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
        yield Reader(home, env, shell.transcript, shell.env["DATABASE_URL"])


def test_getting_started_ends_with_a_worker_processing_jobs(reader):
    venv = reader.home / "shop" / ".venv"
    # Installed from the checkout as a wheel: the package lives in the virtualenv,
    # with the migrations inside it, and nothing points back into the checkout.
    site = list(venv.glob("lib/python*/site-packages/sa_jobqueue"))
    assert len(site) == 1, site
    assert (site[0] / "_alembic" / "versions").is_dir()
    assert not list(venv.glob("lib/python*/site-packages/*sa_jobqueue*.pth"))
    worker_run = next(t for t in reader.transcript if t.startswith("$ sa-jobqueue worker"))
    assert "receipt for order 1 sent (key order:1:receipt)" in worker_run
    assert "stopped after 2 jobs" in worker_run


def test_getting_started_as_written_runs_on_a_sqlite_file(tmp_path):
    # The page's own URL (sqlite:///shop.db): no server, the same worker at the end.
    (tmp_path / "sa-jobqueue").symlink_to(ROOT, target_is_directory=True)
    shell = docs_pages.Shell(cwd=tmp_path, env=_clean_env(), state=tmp_path / ".shell")
    docs_pages.play(
        docs_pages.parse(DOCS / "getting-started.md"),
        shell,
        new_database=lambda: pytest.fail("getting started as written needs no server"),
        as_written=True,
    )
    assert shell.env["DATABASE_URL"] == "sqlite:///shop.db"
    assert (tmp_path / "shop" / "shop.db").is_file()
    worker_run = next(t for t in shell.transcript if t.startswith("$ sa-jobqueue worker"))
    assert "receipt for order 1 sent (key order:1:receipt)" in worker_run
    assert "stopped after 2 jobs" in worker_run


@contextmanager
def _copy_of(server_url: str, url: str) -> Iterator[str]:
    """A new database made from the one at `url` as it is now; dropped afterwards."""
    source = make_url(url).database
    name = f"sa_jobqueue_docs_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server_url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{source}"'))
        try:
            yield make_url(url).set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.mark.parametrize("page", RECIPES, ids=[p.stem for p in RECIPES])
def test_recipe_runs_in_the_database_getting_started_left(
    reader, databases, pooled, server_url, page
):
    # A reader who keeps DATABASE_URL from getting started: its orders, invoices and done
    # jobs are there, its jobs table at the latest revision. Each recipe gets a copy.
    home = reader.home / f"after-getting-started-{page.stem}"
    home.mkdir()
    shell = docs_pages.Shell(cwd=home, env=dict(reader.env), state=home.with_suffix(".shell"))
    with _copy_of(server_url, reader.database) as url:
        shell.env["DATABASE_URL"] = url
        docs_pages.play(docs_pages.parse(page), shell, new_database=databases, pooled=pooled)


@pytest.mark.parametrize("page", RECIPES, ids=[p.stem for p in RECIPES])
def test_recipe_runs_as_written(reader, databases, pooled, page):
    blocks = docs_pages.parse(page)
    assert any(b.role in ("shell", "background") for b in blocks), f"{page.name} runs nothing"
    # Beside shop/ and the checkout, where getting started left the reader.
    state = reader.home / f".{page.stem}"
    shell = docs_pages.Shell(cwd=reader.home, env=dict(reader.env), state=state)
    shell.env["DATABASE_URL"] = databases()  # each recipe starts with an empty database
    docs_pages.play(blocks, shell, new_database=databases, pooled=pooled)


# How older Alembics wrote alembic.ini, made from what `alembic init` writes now: Alembic
# 1.5 to 1.15 had `version_path_separator = os` where 1.16 has `path_separator = os`;
# older ones (and projects started from them, fastapi/full-stack-fastapi-template's) have
# neither. The alembic recipe must work on each: it is replayed with the file rewritten
# so right after every `alembic init` it runs.
OLDER_INI = {
    "version_path_separator": "sed -i.new 's/^path_separator = os$/version_path_separator = os/' "
    "alembic.ini",
    "no_separator": "sed -i.new '/^path_separator = os$/d' alembic.ini",
}


def _as_older_alembic_wrote_it(
    blocks: list[docs_pages.Block], rewrite: str
) -> list[docs_pages.Block]:
    replayed: list[docs_pages.Block] = []
    for block in blocks:
        replayed.append(block)
        if block.role == "shell" and "alembic init" in block.code:
            check = "! grep -E '^path_separator' alembic.ini\nrm alembic.ini.new\n"
            replayed.append(
                docs_pages.Block(block.page, block.line, "bash", None, f"{rewrite}\n{check}")
            )
    assert len(replayed) > len(blocks), "the alembic recipe runs no `alembic init`"
    return replayed


@pytest.mark.parametrize("older", sorted(OLDER_INI))
def test_alembic_recipe_runs_on_an_alembic_ini_of_an_older_alembic(
    reader, databases, pooled, older
):
    blocks = _as_older_alembic_wrote_it(
        docs_pages.parse(DOCS / "recipes" / "alembic.md"), OLDER_INI[older]
    )
    state = reader.home / f".alembic-{older}"
    home = reader.home / f"older-{older}"
    home.mkdir()
    shell = docs_pages.Shell(cwd=home, env=dict(reader.env), state=state)
    shell.env["DATABASE_URL"] = databases()
    docs_pages.play(blocks, shell, new_database=databases, pooled=pooled)
