"""Imports point one way: no circles, and no import against the layer order.

The layers are the ones docs/architecture.md draws. Every import of the
package counts, also one inside a function: a lazy import that only hides a
circle is still one. Imports under ``if TYPE_CHECKING:`` do not run, and are
left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sa_jobqueue"

#: Lowest first. A module may import modules of its own layer or of lower ones.
LAYERS: list[tuple[str, set[str]]] = [
    (
        "foundations",
        {"errors", "model", "retry", "shutdown", "naming", "validation", "ddl", "durations"}
        | {"engines", "state_tables", "aio", "limits", "starts", "columns", "logs"},
    ),
    ("vocabulary", {"context", "attempt", "registry", "cancellation", "middleware", "tracing"}),
    ("sql", {"statements"}),
    (
        "operations",
        {"driver", "enqueue", "inserter", "retention", "admin", "migration", "migration_ops"}
        | {"preflight"}
        | {"periodic"}
        | {"pausing", "flow_migration", "limit_usage", "metrics"},
    ),
    (
        "runtime parts",
        {
            "executor",
            "completer",
            "config",
            "notifier",
            "wakeup",
            "maintenance",
            "pool",
            "aio_pool",
            "limited",
            "claiming",
            "interrupts",
            "claim_loop",
        },
    ),
    ("worker", {"worker"}),
    ("api", {"jobqueue", "operator_api", "", "testing"}),
    ("entry points", {"cli", "pytest_plugin", "dashboard"}),
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, modules: set[str]) -> set[str]:
    """The package's modules that `tree` imports ("" is the package's __init__)."""
    found: set[str] = set()
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            found |= set().union(*(_imports(n, modules) for n in node.orelse))
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "sa_jobqueue" or node.module.startswith("sa_jobqueue."):
                base = node.module.removeprefix("sa_jobqueue").lstrip(".")
                for alias in node.names:
                    sub = f"{base}.{alias.name}".lstrip(".")
                    found.add(sub if sub in modules else base)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "sa_jobqueue" or alias.name.startswith("sa_jobqueue."):
                    found.add(alias.name.removeprefix("sa_jobqueue").lstrip("."))
        found |= _imports(node, modules)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {
        name: _imports(ast.parse(path.read_text()), modules) - {name}
        for name, path in paths.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph` (its modules in order, the first repeated), or None."""
    done: set[str] = set()
    for start in sorted(graph):
        path: list[str] = []
        on_path: set[str] = set()
        stack = [(start, iter(sorted(graph.get(start, ()))))]
        if start in done:
            continue
        path.append(start)
        on_path.add(start)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
            elif child in on_path:
                return [*path[path.index(child) :], child]
            elif child not in done:
                stack.append((child, iter(sorted(graph.get(child, ())))))
                path.append(child)
                on_path.add(child)
    return None


def layer_of(module: str) -> int:
    top = module.split(".")[0]
    for index, (_, members) in enumerate(LAYERS):
        if top in members:
            return index
    raise LookupError(module)


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, imported in sorted(graph.items()):
        for other in sorted(imported):
            if layer_of(other) > layer_of(module):
                above, below = LAYERS[layer_of(other)][0], LAYERS[layer_of(module)][0]
                wrong.append(f"{module or 'sa_jobqueue'} ({below}) imports {other} ({above})")
    return wrong


def test_every_module_has_a_layer():
    unplaced = [m for m in import_graph() if not _has_layer(m)]
    assert not unplaced, f"add {unplaced} to LAYERS here and to docs/architecture.md"


def _has_layer(module: str) -> bool:
    try:
        layer_of(module)
    except LookupError:
        return False
    return True


def test_the_package_has_no_import_circle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(m or "sa_jobqueue" for m in cycle)


def test_imports_follow_the_layer_order():
    assert layer_violations(import_graph()) == []


def test_a_planted_circle_is_found():
    graph = import_graph()
    graph["errors"] = graph["errors"] | {"worker"}  # errors -> worker -> ... -> errors
    cycle = find_cycle(graph)
    assert cycle is not None
    assert cycle[0] == cycle[-1]
    assert "errors" in cycle
    assert layer_violations(graph) == ["errors (foundations) imports worker (worker)"]


@pytest.mark.parametrize("name", sorted({m for _, members in LAYERS for m in members} - {""}))
def test_each_layer_member_is_drawn_in_the_architecture_page(name):
    page = (ROOT / "docs" / "architecture.md").read_text()
    assert f"`{name}" in page, f"docs/architecture.md does not mention {name}"


def test_the_command_line_and_the_worker_do_not_load_alembic():
    """`sa-jobqueue worker` starts without Alembic: only `migrate` imports it."""
    import subprocess
    import sys

    probe = (
        "import sys, sa_jobqueue.cli, sa_jobqueue.worker; "
        "print(sorted(m for m in sys.modules if m == 'alembic' or m.startswith('alembic.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def _loaded_after(code: str) -> set[str]:
    """The top-level and sa_jobqueue modules a fresh interpreter holds after `code`."""
    import subprocess
    import sys

    probe = (
        f"{code}\nimport sys\n"
        "print('\\n'.join(m for m in sys.modules if '.' not in m or m.startswith('sa_jobqueue')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=ROOT,
    )
    return set(done.stdout.split())


#: What a worker, or a plain import, must not load: migrations, optional extras.
OPTIONAL = {"alembic", "prometheus_client", "opentelemetry", "jinja2", "starlette", "uvicorn"}


def test_importing_the_package_loads_only_the_exception_tree():
    """`import sa_jobqueue` pays for no dependency: the other names load at first use."""
    loaded = _loaded_after("import sa_jobqueue")
    assert {m for m in loaded if m.startswith("sa_jobqueue")} == {
        "sa_jobqueue",
        "sa_jobqueue.errors",
    }
    assert not loaded & (OPTIONAL | {"sqlalchemy", "psycopg", "click", "greenlet"})


def test_the_command_line_loads_its_commands_and_sqlalchemy_when_they_are_used():
    loaded = _loaded_after("import sa_jobqueue.cli")
    assert not loaded & (OPTIONAL | {"sqlalchemy", "psycopg"})
    assert not {m for m in loaded if m.startswith("sa_jobqueue.cli.")} - {"sa_jobqueue.cli.app"}


def test_a_worker_loads_neither_the_operator_commands_nor_optional_dependencies():
    """What `sa-jobqueue worker tests.apps.lesson:jobs` imports before its first claim."""
    loaded = _loaded_after(
        "from sa_jobqueue.cli import main\n"
        "assert main.get_command(None, 'worker') is not None\n"  # what click looks up
        "import tests.apps.lesson, sa_jobqueue.worker"
    )
    assert "sa_jobqueue.worker" in loaded
    assert not loaded & OPTIONAL
    unused = {"cli.ops", "cli.control", "cli.dashboard", "cli.render", "dashboard", "migration"}
    assert not loaded & {f"sa_jobqueue.{name}" for name in unused}


def test_every_public_name_of_the_package_imports():
    import sa_jobqueue

    for name in sa_jobqueue.__all__:
        value = getattr(sa_jobqueue, name)
        assert value.__name__ == name
    assert set(sa_jobqueue.__all__) <= set(dir(sa_jobqueue))
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        getattr(sa_jobqueue, "nothing")  # noqa: B009


def test_each_command_is_found_in_the_module_its_name_maps_to():
    import importlib

    from sa_jobqueue.cli.app import SUBCOMMANDS, main

    for module in set(SUBCOMMANDS.values()):
        importlib.import_module(module)
    commands = main.commands
    assert set(commands) == set(SUBCOMMANDS)
    for name, command in commands.items():
        assert command.callback is not None
        assert command.callback.__module__ == SUBCOMMANDS[name], name
