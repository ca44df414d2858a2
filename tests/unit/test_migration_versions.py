"""The versions table and `sa-jobqueue alembic-revision`'s writing, without a database."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory

from sa_jobqueue import ConfigurationError, migration
from sa_jobqueue.migration import app_history, versions


def test_versions_name_every_shipped_revision_in_order():
    # A new shipped revision needs its entry in versions.VERSIONS (one line of a table).
    config = Config()
    config.set_main_option("script_location", str(migration.script_location()))
    script = ScriptDirectory.from_config(config)
    shipped = [s.revision for s in reversed(list(script.walk_revisions()))]
    assert [v.revision for v in versions.VERSIONS] == shipped
    assert shipped[-1] == versions.LATEST


def _project(root: Path) -> Config:
    """An Alembic project as `alembic init` lays it out: alembic.ini, script.py.mako."""
    import alembic

    templates = Path(alembic.__file__).parent / "templates" / "generic"
    (root / "migrations" / "versions").mkdir(parents=True)
    shutil.copy(templates / "script.py.mako", root / "migrations")
    (root / "alembic.ini").write_text("[alembic]\nscript_location = %(here)s/migrations\n")
    return Config(str(root / "alembic.ini"))


def _source(root: Path, rev_id: str) -> str:
    (path,) = (root / "migrations" / "versions").glob(f"{rev_id}_*.py")
    return path.read_text()


def _down_revision(root: Path, rev_id: str) -> str:
    """The value a revision's ``down_revision`` is set to, as written (its annotation is
    the installed Alembic's template's)."""
    found = re.search(r"^down_revision\b[^=]*= (.*)$", _source(root, rev_id), re.MULTILINE)
    assert found is not None
    return found[1]


def test_each_run_writes_the_next_step_from_where_the_history_left_the_table(tmp_path):
    config = _project(tmp_path)
    first = app_history.write_revision(config, revision="sajq_0002", revision_id="a1")
    assert (first.before, first.after) == ("base", "sajq_0002")
    assert first.path is not None
    assert first.path.name.startswith("a1_")
    assert "upgrade_to('sajq_0002', table='jobs')" in _source(tmp_path, "a1")
    assert "downgrade_to('base', table='jobs')" in _source(tmp_path, "a1")
    assert "from sa_jobqueue.migration import downgrade_to, upgrade_to" in _source(tmp_path, "a1")

    second = app_history.write_revision(config, revision_id="a2")
    assert (second.before, second.after) == ("sajq_0002", versions.LATEST)
    assert _down_revision(tmp_path, "a2") == "'a1'"
    assert "downgrade_to('sajq_0002', table='jobs')" in _source(tmp_path, "a2")

    third = app_history.write_revision(config)
    assert third.path is None
    assert len(list((tmp_path / "migrations" / "versions").glob("*.py"))) == 2


def test_each_table_has_its_own_level_in_the_history(tmp_path):
    config = _project(tmp_path)
    app_history.write_revision(config, revision_id="a1")
    other = app_history.write_revision(config, table="mail_jobs", schema="queues", revision_id="a2")
    assert other.before == "base"
    assert "upgrade_to(" in _source(tmp_path, "a2")
    assert "table='mail_jobs', schema='queues')" in _source(tmp_path, "a2")
    script = ScriptDirectory.from_config(config)
    assert app_history.recorded_revision(script, "a2") == versions.LATEST
    assert app_history.recorded_revision(script, "a2", "mail_jobs") == "base"
    assert app_history.recorded_revision(script, "a2", "mail_jobs", schema="queues") == (
        versions.LATEST
    )


def test_a_hand_written_upgrade_to_counts_as_well(tmp_path):
    config = _project(tmp_path)
    (tmp_path / "migrations" / "versions" / "h1_jobs.py").write_text(
        textwrap.dedent(
            """\
            from sa_jobqueue import migration

            revision = "h1"
            down_revision = None


            def upgrade():
                migration.upgrade_to("sajq_0003", "jobs")


            def downgrade():
                migration.downgrade_to("base", "jobs")
            """
        )
    )
    written = app_history.write_revision(config, revision_id="a2")
    assert (written.before, written.after) == ("sajq_0003", versions.LATEST)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"revision": "sajq_9999"}, "unknown sa-jobqueue revision 'sajq_9999'"),
        ({"table": "bad name"}, "must be letters, digits and _"),
        ({"table": "j" * 45}, "too long"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_written(tmp_path, kwargs, message):
    config = _project(tmp_path)
    with pytest.raises(ConfigurationError, match=message):
        app_history.write_revision(config, **kwargs)
    assert not list((tmp_path / "migrations" / "versions").glob("*.py"))


def test_an_older_revision_than_the_history_has_is_refused(tmp_path):
    config = _project(tmp_path)
    app_history.write_revision(config, revision_id="a1")
    with pytest.raises(ConfigurationError, match="past sajq_0002"):
        app_history.write_revision(config, revision="sajq_0002")


def test_a_history_with_two_heads_needs_head(tmp_path):
    config = _project(tmp_path)
    script = ScriptDirectory.from_config(config)
    script.generate_revision("x1", "one", head="base")
    script.generate_revision("y1", "two", head="base", splice=True)
    with pytest.raises(ConfigurationError, match=r"2 heads \(x1, y1\): pass --head"):
        app_history.write_revision(config)
    written = app_history.write_revision(config, head="y1", revision_id="a1")
    assert _down_revision(tmp_path, "a1") == "'y1'"
    assert written.before == "base"


def test_a_history_still_on_the_shipped_branch_is_refused(tmp_path):
    _project(tmp_path)
    ini = tmp_path / "alembic.ini"
    ini.write_text(
        ini.read_text()
        + f"version_locations = %(here)s/migrations/versions {migration.versions_location()}\n"
        + "path_separator = space\n"
    )
    for head in (None, "sajq_0004"):
        with pytest.raises(ConfigurationError, match="still has the shipped sa_jobqueue branch"):
            app_history.write_revision(Config(str(ini)), head=head)


def test_no_configuration_here_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ALEMBIC_CONFIG", raising=False)
    with pytest.raises(ConfigurationError, match=r"no alembic.ini \(nor pyproject.toml"):
        app_history.find_config()
    with pytest.raises(ConfigurationError, match=r"no Alembic configuration at 'nowhere\.ini'"):
        app_history.find_config("nowhere.ini")
