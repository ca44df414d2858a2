"""SQLAlchemy's private API stays in `core.sqlalchemy_private`, each use with a public path.

The enqueue scenarios that run both paths against the database are in
tests/integration/enqueue/test_sqlalchemy_paths.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, Text, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateColumn

import sa_jobqueue
from sa_jobqueue.core import sqlalchemy_private

PACKAGE = Path(sa_jobqueue.__file__).parent
PRIVATE_MODULE = Path(sqlalchemy_private.__file__)

#: Underscored names that are public API: SQLAlchemy's ``Row`` (and the named tuple's)
#: ``_mapping``, ``_asdict``, ``_fields``, ``_t``, ``_tuple``; ``os._exit``.
PUBLIC_UNDERSCORED = {"_mapping", "_asdict", "_fields", "_t", "_tuple", "_exit"}
#: Private SQLAlchemy names the package once used outside the module: never allowed,
#: even where a class of ours has an attribute of that name.
KNOWN_PRIVATE = {
    "_cursor_execute",
    "_has_events",
    "_execution_options",
    "_bind_processors",
    "_cached_result_processor",
    "_returning",
    "_expire_attributes",
    "_add_unpresent",
    "_identity_class",
    "_flushing",
    "_autoflush",
    "_check_configure",
    "_inheriting_mappers",
    "_json_deserializer",
    "_copy",
}


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text())) for path in sorted(PACKAGE.rglob("*.py"))]


def _own_names(modules: list[tuple[Path, ast.Module]]) -> set[str]:
    """The underscored names the package itself defines: its attributes, methods, fields."""
    names: set[str] = set()
    for _, tree in modules:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.rsplit(".", 1)[-1])
    return {name for name in names if name.startswith("_")}


def test_no_module_but_one_names_a_private_sqlalchemy_attribute():
    modules = _modules()
    allowed = (_own_names(modules) | PUBLIC_UNDERSCORED) - KNOWN_PRIVATE
    found = []
    for path, tree in modules:
        if path == PRIVATE_MODULE:
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                and node.attr not in allowed
            ):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.attr}")
    assert not found, "private SQLAlchemy API outside sqlalchemy_private.py:\n" + "\n".join(found)


def test_the_guard_sees_a_private_attribute_in_a_module_of_the_package():
    tree = ast.parse("def f(session):\n    return session._flushing or column._copy()\n")
    names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    allowed = (_own_names(_modules()) | PUBLIC_UNDERSCORED) - KNOWN_PRIVATE
    assert names - allowed == {"_flushing", "_copy"}


def test_every_private_path_is_there_on_this_sqlalchemy():
    # The fast tier runs on the floor SQLAlchemy and on the newest (.ci/floor-versions):
    # one that drops a private attribute still works, on its public path, but slower.
    assert all(sqlalchemy_private.PRIVATE.values()), sqlalchemy_private.PRIVATE


def test_public_paths_names_only_uses_that_exist():
    with pytest.raises(ValueError, match="no such use"), sqlalchemy_private.public_paths("nope"):
        pass


def _ddl(columns: list[Column[object]]) -> list[str]:
    table = columns[0].table if columns[0].table is not None else Table("c", MetaData(), *columns)
    return [str(CreateColumn(c).compile(dialect=postgresql.dialect())) for c in table.columns]


def test_a_column_copies_alike_on_both_paths(recwarn):
    def original() -> Table:
        return Table(
            "t",
            MetaData(),
            Column("id", Integer, primary_key=True),
            Column("name", Text, nullable=False, server_default=text("'x'"), info={"since": "r"}),
        )

    table = original()
    private = [sqlalchemy_private.copy_column(c) for c in table.columns]
    with sqlalchemy_private.public_paths("copy_column"):
        public = [sqlalchemy_private.copy_column(c) for c in table.columns]
    assert [c.table for c in [*private, *public]] == [None] * 4  # attached to no table
    assert [(c.name, c.info, c.primary_key) for c in private] == [
        (c.name, c.info, c.primary_key) for c in public
    ]
    assert _ddl(private) == _ddl(public) == _ddl(list(original().columns))
    assert not recwarn.list  # the public path's deprecation warning is its own business
