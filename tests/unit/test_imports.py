"""Imports point one way: the layer contracts of pyproject.toml hold, and start-up loads little.

The layer order is import-linter configuration (``[tool.importlinter]``), the same
one docs/architecture.md draws; `make lint` runs ``lint-imports``, and the first
tests here run it too, once on the package and once on a copy with an upward
import planted, which it must reject. What no linter can express (what a fresh
interpreter holds after an import) is checked by the ``sys.modules`` tests below.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from sqlalchemy import Engine

from tests.support.processes import every_database

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sa_jobqueue"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(package_parent: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=package_parent,
        env={"PYTHONPATH": str(package_parent), "PATH": "/usr/bin:/bin"},
        check=False,
    )


def _contracts_only(tmp_path: Path) -> Path:
    """pyproject.toml's import-linter section alone, as a file of its own."""
    config = tmp_path / ".importlinter.toml"
    config.write_text((ROOT / "pyproject.toml").read_text())
    return config


def test_the_package_keeps_its_layer_contracts(tmp_path):
    done = _lint_imports(ROOT, _contracts_only(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_a_planted_upward_import_breaks_the_layer_contract(tmp_path):
    copy = tmp_path / "tree"
    shutil.copytree(PACKAGE, copy / "sa_jobqueue", ignore=shutil.ignore_patterns("__pycache__"))
    validation = copy / "sa_jobqueue" / "core" / "validation.py"
    validation.write_text(validation.read_text() + "\nfrom sa_jobqueue.worker import loop\n")
    done = _lint_imports(copy, _contracts_only(tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "sa_jobqueue.core.validation -> sa_jobqueue.worker.loop" in done.stdout
    assert "BROKEN" in done.stdout


def _layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return [name.strip() for layer in config["contracts"][0]["layers"] for name in layer.split("|")]


def test_every_module_of_the_package_has_a_layer():
    layered = set(_layers())
    tops = {
        f"sa_jobqueue.{p.stem if p.is_file() else p.name}"
        for p in PACKAGE.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    }
    assert tops - layered == set(), "add them to [tool.importlinter] and docs/architecture.md"


@pytest.mark.parametrize("name", _layers())
def test_each_layer_member_is_drawn_in_the_architecture_page(name):
    page = (ROOT / "docs" / "architecture.md").read_text()
    short = name.removeprefix("sa_jobqueue.")
    assert f"`{short}" in page, f"docs/architecture.md does not mention {short}"


def test_the_command_line_and_the_worker_do_not_load_alembic():
    """`sa-jobqueue worker` starts without Alembic: only `migrate` imports it."""
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
    """What `sa-jobqueue worker tests.support.apps.lesson:jobs` imports before its first claim."""
    loaded = _loaded_after(
        "from sa_jobqueue.cli import main\n"
        "assert main.get_command(None, 'worker') is not None\n"  # what click looks up
        "import tests.support.apps.lesson, sa_jobqueue.worker"
    )
    assert "sa_jobqueue.worker" in loaded
    assert not loaded & OPTIONAL
    unused = {"cli.ops", "cli.control", "cli.dashboard", "cli.render", "dashboard"}
    unused |= {"cli.stats", "cli.repair", "cli.prune", "cli.enqueue", "cli.progress"}
    # The migration package's Alembic half; the worker's start checks (preflight) load no Alembic.
    unused |= {"migration.scripts", "migration.ops"}
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


@every_database
def test_a_started_worker_loads_no_optional_dependency_nor_another_databases_client(
    test_database_url: str, committed: Engine
):
    """A worker built and drained in code (no CLI) on each database loads what it uses only.

    No Alembic, dashboard, metrics or tracing library, no click; and off PostgreSQL no
    psycopg (its LISTEN, autocommit claims and ``jobs.wait`` import it when they run).
    """
    loaded = _loaded_after(
        "from sqlalchemy import create_engine\n"
        "from tests.support.apps.lesson import jobs\n"
        f"engine = create_engine({test_database_url!r})\n"
        "jobs.worker(engine, concurrency=4).drain()\n"
        "engine.dispose()"
    )
    assert "sa_jobqueue.worker.worker" in loaded
    assert not loaded & (OPTIONAL | {"click", "sa_jobqueue.dashboard", "sa_jobqueue.cli"})
    if not test_database_url.startswith("postgresql"):
        assert "psycopg" not in loaded
