"""docs/recipes/flask.md followed literally by a microblog user, on ``sqlite:///app.db`` (issue 38).

The reader is the one getting started leaves on SQLite (its page played as written: a
virtualenv with sa-jobqueue installed from the checkout, no server). They go on to the
Flask recipe the way the page says: no ``DATABASE_URL`` (the app's config then falls
back to ``sqlite:///app.db``, as microblog's does), or, for production, one naming a
PostgreSQL or a MariaDB database (MariaDB after the page's ``pip install
'sa-jobqueue[mysql]'``, run from the reader's home, beside the checkout). Every block is
played as written (tests/support/docs_pages.py):
``flask db init``, ``sa-jobqueue alembic-revision``, ``flask db migrate/upgrade/check``,
requests through Flask's test client (a signup, an export with its ``Task`` row), ``flask
jobs worker`` as a real process stopped with Ctrl+C, the page's own pytest run and
``flask db downgrade base``. Then the database is read: the jobs ran, the ``Task`` row
shares its job's id and is complete, the job's ``progress`` column holds 1, and the
downgrade leaves only Alembic's version table.

test_docs_pages.py also plays this page, with every other recipe, on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from sa_jobqueue.testing import scratch_database
from tests.acceptance.test_docs_pages import _clean_env
from tests.support import docs_pages
from tests.support.databases import mariadb_database, mariadb_server_url

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "recipes" / "flask.md"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> docs_pages.Shell:
    """A terminal where getting started, played as written on SQLite, left its reader."""
    home = tmp_path_factory.mktemp("flask-reader")
    (home / "sa-jobqueue").symlink_to(ROOT, target_is_directory=True)
    shell = docs_pages.Shell(cwd=home, env=_clean_env(), state=home / ".getting-started")
    docs_pages.play(
        docs_pages.parse(ROOT / "docs" / "getting-started.md"),
        shell,
        new_database=lambda: pytest.fail("getting started as written needs no server"),
        as_written=True,
    )
    assert shell.env["DATABASE_URL"] == "sqlite:///shop.db"
    return shell


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def database(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The ``DATABASE_URL`` the reader exports: none (the app's SQLite file), or a server's."""
    if request.param == "sqlite":
        yield None
    elif request.param == "postgresql":
        server_url = request.getfixturevalue("server_url")
        with scratch_database(server_url, prefix="sa_jobqueue_flask_page") as url:
            yield url
    else:
        with mariadb_database(mariadb_server_url(request.config), "sajq_flask_page") as url:
            # The page installs PyMySQL (`sa-jobqueue[mysql]`), whichever driver the suite's
            # own MariaDB URL names.
            yield make_url(url).set(drivername="mariadb+pymysql").render_as_string(False)


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(text(sql))]
    finally:
        engine.dispose()


def test_the_flask_page_as_written(reader, database, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "sa-jobqueue").symlink_to(ROOT, target_is_directory=True)
    shell = docs_pages.Shell(cwd=home, env=dict(reader.env), state=tmp_path / ".flask")
    # What the page says to a reader whose terminal exported getting started's URL.
    shell.run("unset DATABASE_URL")
    assert "DATABASE_URL" not in shell.env
    if database is not None:  # the page's production section, from the reader's home
        if database.startswith("mariadb"):
            shell.run("pip install --quiet './sa-jobqueue[mysql]'")
        shell.run(f"export DATABASE_URL='{database}'")
    blocks = docs_pages.parse(PAGE)
    downgrade = next(i for i, b in enumerate(blocks) if "flask db downgrade" in b.code)
    no_server = lambda: pytest.fail("the Flask page needs no database made for it")  # noqa: E731
    docs_pages.play(blocks[:downgrade], shell, new_database=no_server, as_written=True)

    project = home / "flask-shop"
    app_db = project / "instance" / "app.db"
    if database is None:
        # sqlite:///app.db, in the app's instance folder, as Flask-SQLAlchemy reads it;
        # and no other SQLite file anywhere (not getting started's shop.db either).
        assert app_db.is_file()
        assert sorted(p.name for p in home.rglob("*.db")) == ["app.db"]
        url = f"sqlite:///{app_db}"
    else:
        assert not app_db.exists()
        url = database

    worker = next(t for t in shell.transcript if t.startswith("$ flask jobs worker"))
    assert "stopped after 2 jobs" in worker  # a real process, stopped with Ctrl+C
    (version,) = _rows(url, "SELECT version_num FROM alembic_version")
    assert (project / "migrations" / "versions").is_dir()
    assert any(version[0] in p.name for p in (project / "migrations" / "versions").glob("*.py"))

    jobs = _rows(url, "SELECT id, kind, status, attempts, progress FROM jobs ORDER BY id")
    assert [(kind, status, attempts) for _, kind, status, attempts, _ in jobs] == [
        ("send_welcome", "done", 1),
        ("export_signups", "done", 1),
    ]
    export_id, progress = jobs[1][0], jobs[1][4]
    assert progress is not None
    assert float(str(progress)) == 1.0  # ctx.progress(1 / 1): the JSON number, either database
    # The Task row the export's request wrote with its job: keyed by the job's id, complete.
    assert _rows(url, "SELECT id, name, complete FROM tasks") == [
        (str(export_id), "export_signups", True)
    ]
    assert _rows(url, "SELECT email, welcomed FROM signups") == [("ada@example.com", True)]

    # The rest: `flask db downgrade base`, then back up, and `flask db check` is quiet.
    docs_pages.play(blocks[downgrade:], shell, new_database=no_server, as_written=True)
    assert _rows(url, "SELECT count(*) FROM jobs") == [(0,)]
    shell.run("flask db downgrade base")
    engine = create_engine(url, poolclass=NullPool)
    try:
        left = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert left == {"alembic_version"}, left
