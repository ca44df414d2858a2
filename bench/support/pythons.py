"""Second interpreters: ``python -m bench --python 3.13`` runs each scenario there too.

The runner measures each scenario in its own interpreter and again, by subprocess, in
each ``--python``'s: ``.venv-VERSION/bin/python`` of this checkout (``make bench-pythons``
makes it with ``pip install -e '.[test,bench]'``), or the path of an interpreter that has
the same packages. The child is ``python -m bench SCENARIO --database-url URL`` with the
options the runner gave the scenario; its verdicts carry its Python version
(`bench.targets.record`), so the targets table gets a column per database and Python.
Its reports go under ``bench/out/python-VERSION/``, never over the main interpreter's
records (``SAJQ_BENCH_REPORTS``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.support.workers import ROOT

#: Set for a child: where its reports go, and the command the whole run was.
REPORTS = "SAJQ_BENCH_REPORTS"
COMMAND = "SAJQ_BENCH_COMMAND"


def version() -> str:
    """This interpreter's ``MAJOR.MINOR``: the Python part of a targets column."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


@dataclass(frozen=True)
class Interpreter:
    """A second interpreter the scenarios run in: its ``MAJOR.MINOR`` and executable."""

    version: str
    path: Path


def resolve(spec: str) -> Interpreter:
    """The interpreter `spec` names: a version (``3.13``: ``.venv-3.13``) or a path.

    Raises SystemExit with what to do when it is missing, cannot run, lacks the bench's
    packages, or is this very interpreter's version.
    """
    path = Path(spec) if "/" in spec else ROOT / f".venv-{spec}" / "bin" / "python"
    if not path.exists():
        raise SystemExit(
            f"--python {spec}: no {path}; make it with `make bench-pythons` (or "
            f"python{spec} -m venv .venv-{spec} && .venv-{spec}/bin/pip install -e "
            "'.[test,bench]'), or give the path of an interpreter"
        )
    probe = "import sys, sqlalchemy, sa_jobqueue; print('%d.%d' % sys.version_info[:2])"
    done = subprocess.run(
        [str(path), "-c", probe], capture_output=True, text=True, cwd=ROOT, check=False
    )
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"--python {spec}: {path} cannot run the bench ({last})")
    found = done.stdout.strip()
    if found == version():
        raise SystemExit(f"--python {spec}: {path} is Python {found}, the runner's own")
    return Interpreter(found, path)


def run(interpreter: Interpreter, name: str, url: str, options: list[str], quick: bool) -> int:
    """Run scenario `name` on `url` in `interpreter`; its exit status.

    `options` are the scenario's own (the suite's and the command line's); ``--quick``
    is passed on as the runner's flag, so the child adds the scenario's QUICK sizes itself.
    """
    argv = [str(interpreter.path), "-m", "bench", name, *(["--quick"] if quick else [])]
    if url:
        argv += ["--database-url", url]
    env = dict(os.environ)
    env[REPORTS] = str(ROOT / "bench" / "out" / f"python-{interpreter.version}")
    env[COMMAND] = env.get(COMMAND) or command()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run([*argv, *options], cwd=ROOT, env=env, check=False).returncode


def command() -> str:
    """The run's command as a reader would type it again (a child: its runner's)."""
    return os.environ.get(COMMAND) or " ".join(["python -m bench", *sys.argv[1:]])
