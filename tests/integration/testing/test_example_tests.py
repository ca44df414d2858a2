"""examples/test_orders_example.py passes the way an application runs it: installed, no conftest.

The package is built into a wheel and installed into a directory of its own; the
example and the app it tests are copied into an empty directory (no conftest.py,
no pytest configuration) and pytest runs there in a subprocess, so the fixtures
can only come from the installed package's ``pytest11`` entry point.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # pytest in subprocesses

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"


def _install_wheel(tmp_path: Path) -> Path:
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("hatchling") else []
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip"]
    build = [*pip, "wheel", "--no-deps", *isolation, "-q", "-w", str(dist), str(REPO)]
    subprocess.run(build, check=True, capture_output=True, timeout=300)
    (wheel,) = dist.glob("sa_jobqueue-*.whl")
    site = tmp_path / "site"
    install = [*pip, "install", "-q", "--no-deps", "--target", str(site), str(wheel)]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    return site


def test_the_orders_example_tests_pass_with_only_the_installed_package(server_url, tmp_path):
    site = _install_wheel(tmp_path)
    project = tmp_path / "orders_app"
    project.mkdir()
    for name in ("orders.py", "test_orders_example.py"):
        shutil.copy(EXAMPLES / name, project / name)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "DATABASE_URL"))
    }
    env["PYTHONPATH"] = str(site)  # the wheel's sa_jobqueue, ahead of this checkout's
    env["DATABASE_URL"] = server_url

    where = subprocess.run(
        [sys.executable, "-c", "import sa_jobqueue.pytest_plugin as p; print(p.__file__)"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(site)

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "test_orders_example.py"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"rootdir: {project}" in done.stdout  # no configuration from this repository
    assert "sa-jobqueue-0.1.0" in done.stdout  # the plugin line: loaded from its entry point
    assert " 10 passed" in done.stdout
