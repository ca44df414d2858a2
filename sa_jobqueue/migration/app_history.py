"""Write the jobs table's next step into the application's own Alembic history.

``sa-jobqueue alembic-revision`` (`write_revision`) finds the application's Alembic
configuration, its single head, and the shipped revision its history already brings
the jobs table to (`recorded_revision`, read from the ``upgrade_to`` calls of its
revisions); then it writes one ordinary revision on that head whose ``upgrade()``
calls `sa_jobqueue.migration.upgrade_to` and whose ``downgrade()`` calls
`downgrade_to`. ``alembic upgrade head`` stays the only command. See
docs/migrations.md.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path

from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util import CommandError, rev_id

from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.migration.versions import BASE, LATEST, VERSIONS
from sa_jobqueue.schema.naming import check_identifier, check_table_name

__all__ = [
    "FLASK_MIGRATE_DIRECTORY",
    "Written",
    "find_config",
    "recorded_revision",
    "upgrade_command",
    "write_revision",
]

_BRANCH = "sa_jobqueue"


def find_config(path: str | os.PathLike[str] | None = None) -> Config:
    """The application's Alembic configuration, found the way the ``alembic`` command does.

    `path` (``-c``), else ``$ALEMBIC_CONFIG``, else ``alembic.ini`` in the current
    directory, else Flask-Migrate's ``migrations/alembic.ini``; ``pyproject.toml``'s
    ``[tool.alembic]`` beside it is read too, or alone. A Flask-Migrate folder's
    configuration names no ``script_location``: its folder is the script directory,
    as ``flask db`` sets it.

    Raises:
        ConfigurationError: no configuration there.
    """
    named = path or os.environ.get("ALEMBIC_CONFIG")
    ini = Path(named) if named else Path("alembic.ini")
    if named and not ini.is_file():
        raise ConfigurationError(f"no Alembic configuration at {str(ini)!r}")
    if not named and not ini.is_file() and _flask_migrate(Path(FLASK_MIGRATE_DIRECTORY)):
        ini = Path(FLASK_MIGRATE_DIRECTORY) / "alembic.ini"
    pyproject = ini.parent / "pyproject.toml"
    toml = pyproject if pyproject.is_file() else None
    if not ini.is_file() and toml is None:
        raise ConfigurationError(
            "no alembic.ini (nor pyproject.toml with [tool.alembic]) in "
            f"{str(Path.cwd())!r}: run this where you run alembic, or pass -c PATH"
        )
    config = Config(ini if ini.is_file() else None, toml_file=toml)
    if ini.is_file() and _flask_migrate(ini.parent) and not _has_script_location(config):
        # As Flask-Migrate's commands do: its alembic.ini names no script_location,
        # the folder holding it is the script directory.
        config.set_main_option("script_location", str(ini.parent))
    return config


#: Where Flask-Migrate keeps its Alembic environment unless told otherwise.
FLASK_MIGRATE_DIRECTORY = "migrations"


def _flask_migrate(folder: Path) -> bool:
    """Whether `folder` is a Flask-Migrate environment (``flask db init`` made it)."""
    env = folder / "env.py"
    return (
        (folder / "alembic.ini").is_file()
        and env.is_file()
        and "current_app" in env.read_text(errors="replace")
    )


def _has_script_location(config: Config) -> bool:
    try:
        return bool(config.get_main_option("script_location"))
    except CommandError:
        return False


def upgrade_command(config: Config) -> str:
    """The command that applies the history of `config`: Flask-Migrate's, or Alembic's."""
    location = config.get_main_option("script_location")
    if location and _flask_migrate(Path(location)):
        return "flask db upgrade"
    return "alembic upgrade head"


def _calls(source: str, table: str, schema: str | None) -> list[str]:
    """The revisions ``upgrade_to(...)`` calls in `source` name for `table`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        if name != "upgrade_to" or not node.args:
            continue
        values = {kw.arg: kw.value for kw in node.keywords}
        if len(node.args) > 1:
            values["table"] = node.args[1]
        said = {
            key: value.value for key, value in values.items() if isinstance(value, ast.Constant)
        }
        first = node.args[0]
        if (
            isinstance(first, ast.Constant)
            and said.get("table", "jobs") == table
            and said.get("schema") == schema
        ):
            found.append(str(first.value))
    return found


def recorded_revision(
    script: ScriptDirectory, head: str, table: str = "jobs", *, schema: str | None = None
) -> str:
    """The shipped revision that the history up to `head` upgrades `table` to (or `BASE`).

    Read from the ``upgrade_to("sajq_...", table=...)`` calls in the source of `head`
    and of every revision before it: the highest one named.
    """
    order = [version.revision for version in VERSIONS]
    best = BASE
    for found in script.iterate_revisions(head, "base"):
        for revision in _calls(Path(found.path).read_text(), table, schema):
            if revision in order and (best == BASE or order.index(revision) > order.index(best)):
                best = revision
    return best


@dataclass(frozen=True)
class Written:
    """What `write_revision` did: the file (None when nothing was due) and the two levels."""

    path: Path | None
    before: str
    after: str


def write_revision(
    config: Config,
    *,
    table: str = "jobs",
    schema: str | None = None,
    revision: str = LATEST,
    message: str | None = None,
    revision_id: str | None = None,
    head: str | None = None,
) -> Written:
    """Write a revision on the history's head that brings `table` to the shipped `revision`.

    Its ``upgrade()`` calls ``upgrade_to(revision, table=...)``; its ``downgrade()``
    calls ``downgrade_to(<where the history left the table>, table=...)``. Nothing
    is written when the history brings the table there already (`Written.path` is
    None). The file comes from the environment's own ``script.py.mako`` and goes
    through its post-write hooks, as ``alembic revision`` would write it.

    Raises:
        ConfigurationError: a bad table name or revision; a history with several
            heads (the shipped ``sa_jobqueue`` branch still in ``version_locations``,
            say) and no `head`; a `revision` older than what the history has.
    """
    check_table_name(table)
    if schema is not None:
        check_identifier(schema)
    order = [version.revision for version in VERSIONS]
    if revision not in order:
        raise ConfigurationError(
            f"unknown sa-jobqueue revision {revision!r}: this version knows {', '.join(order)}"
        )
    try:
        script = ScriptDirectory.from_config(config)
    except CommandError as error:  # no script_location, a missing directory
        raise ConfigurationError(f"Alembic configuration: {error}") from error
    heads = script.get_heads()
    if any(_BRANCH in script.get_revision(h).branch_labels for h in heads):
        # Both would create the table on a new database, in no set order.
        raise ConfigurationError(
            "this history still has the shipped sa_jobqueue branch (its "
            "version_locations list sa_jobqueue's versions): move off it first "
            "(docs/migrations.md, 'Moving between the ways')"
        )
    if head is None:
        if len(heads) > 1:
            raise ConfigurationError(
                f"the history has {len(heads)} heads ({', '.join(sorted(heads))}): "
                "pass --head with the one to write on, or merge them first"
            )
        head = heads[0] if heads else None
    before = recorded_revision(script, head, table, schema=schema) if head else BASE
    if before != BASE and order.index(before) >= order.index(revision):
        if order.index(before) > order.index(revision):
            raise ConfigurationError(
                f"the history brings table {table!r} to {before} already, past {revision}"
            )
        return Written(None, before, revision)
    where = f"table={table!r}" + (f", schema={schema!r}" if schema else "")
    try:
        written = script.generate_revision(
            revision_id or rev_id(),
            message or f"sa-jobqueue: {table} table to {revision}",
            head=head or "base",
            imports="from sa_jobqueue.migration import downgrade_to, upgrade_to",
            upgrades=f"upgrade_to({revision!r}, {where})",
            downgrades=f"downgrade_to({before!r}, {where})",
        )
    except CommandError as error:
        raise ConfigurationError(str(error)) from error
    if written is None:  # the template wrote something Alembic cannot read back
        raise ConfigurationError("Alembic wrote a revision it cannot read back")
    return Written(Path(written.path), before, revision)
