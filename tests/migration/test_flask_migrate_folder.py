"""``sa-jobqueue alembic-revision`` on a Flask-Migrate ``migrations/`` folder as it is (issue 41).

``flask db init`` writes an ``alembic.ini`` without ``script_location`` (Flask-Migrate
sets it at run time to the folder) and an ``env.py`` that reads ``current_app``. The
command reads the folder as Flask-Migrate does, with ``-c migrations/alembic.ini`` or
without, and says to run ``flask db upgrade``. No database is needed to write a revision.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import alembic

ROOT = Path(__file__).resolve().parents[2]
GENERIC = Path(alembic.__file__).parent / "templates" / "generic"

# What Flask-Migrate's "flask" template writes (its alembic.ini names no script_location).
FLASK_MIGRATE_INI = """\
# A generic, single database configuration.

[alembic]
# template used to generate migration files
# file_template = %%(rev)s_%%(slug)s

# set to 'true' to run the environment during
# the 'revision' command, regardless of autogenerate
# revision_environment = false


# Logging configuration
[loggers]
keys = root,sqlalchemy,alembic,flask_migrate

[handlers]
keys = console

[formatters]
keys = generic

[logger_root]
level = WARN
handlers = console
qualname =

[logger_sqlalchemy]
level = WARN
handlers =
qualname = sqlalchemy.engine

[logger_alembic]
level = INFO
handlers =
qualname = alembic

[logger_flask_migrate]
level = INFO
handlers =
qualname = flask_migrate

[handler_console]
class = StreamHandler
args = (sys.stderr,)
level = NOTSET
formatter = generic

[formatter_generic]
format = %(levelname)-5.5s [%(name)s] %(message)s
datefmt = %H:%M:%S
"""

FLASK_MIGRATE_ENV = """\
import logging
from logging.config import fileConfig

from flask import current_app

from alembic import context

config = context.config
fileConfig(config.config_file_name)
logger = logging.getLogger('alembic.env')
target_db = current_app.extensions['migrate'].db
"""


def flask_migrate_project(tmp_path: Path) -> Path:
    folder = tmp_path / "migrations"
    (folder / "versions").mkdir(parents=True)
    (folder / "alembic.ini").write_text(FLASK_MIGRATE_INI)
    (folder / "env.py").write_text(FLASK_MIGRATE_ENV)
    shutil.copy(GENERIC / "script.py.mako", folder / "script.py.mako")
    return tmp_path


def revision(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sa_jobqueue.cli", "alembic-revision", *args],
        cwd=project,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_alembic_revision_writes_into_a_flask_migrate_folder_with_c(tmp_path):
    project = flask_migrate_project(tmp_path)
    done = revision(project, "-c", "migrations/alembic.ini", "--rev-id", "app_0001")
    assert done.returncode == 0, done.stderr
    written = list((project / "migrations" / "versions").glob("app_0001_*.py"))
    assert len(written) == 1
    assert "upgrade_to('sajq_" in written[0].read_text()
    assert "(run: flask db upgrade)" in done.stdout
    assert "alembic upgrade head" not in done.stdout


def test_alembic_revision_finds_the_flask_migrate_folder_by_itself(tmp_path):
    project = flask_migrate_project(tmp_path)
    done = revision(project, "--rev-id", "app_0001")
    assert done.returncode == 0, done.stderr
    assert len(list((project / "migrations" / "versions").glob("app_0001_*.py"))) == 1
    assert "(run: flask db upgrade)" in done.stdout
    again = revision(project)
    assert again.returncode == 0, again.stderr
    assert "nothing to write" in again.stdout
