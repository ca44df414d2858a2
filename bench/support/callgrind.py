"""Instructions counted by ``valgrind --tool=callgrind``: figures the machine's load moves little.

A scenario writes a child script (its `CHILD` text, formatted with `SUPPORT` so that it
imports ``app`` as the benchmark's application), runs it with N and with 0 of what it
counts, and takes the difference: interpreter start, imports and set-up cancel out.
Every run has ``PYTHONHASHSEED=0``, so two runs of one tree count the same.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from bench.support.workers import ROOT

#: The folder of ``app.py``: child scripts put it first on ``sys.path``.
SUPPORT = Path(__file__).resolve().parent


def require(scenario: str) -> None:
    """Stop with how to install valgrind where it is missing."""
    if shutil.which("valgrind") is None:
        raise SystemExit(f"bench scenario {scenario} needs valgrind: apt-get install -y valgrind")


def instructions(script: Path, mode: str, n: int, url: str, out: Path) -> int:
    """The instructions callgrind counted over one run of ``script mode n url``."""
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        sys.executable,
        str(script),
        mode,
        str(n),
        url,
    ]
    # A pinned hash seed: str hashing decides set and dict layouts, and a random seed
    # moved the single enqueue's count by about 5 % between runs of one tree.
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT, env=env)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"callgrind run failed ({mode} {n}):\n{done.stderr[-2000:]}")
    return int(found.group(1))


def commit() -> str:
    """The checkout's commit, ``hash subject``, for a history line."""
    done = subprocess.run(
        ["git", "log", "-1", "--format=%h %s"], capture_output=True, text=True, cwd=ROOT
    )
    return done.stdout.strip()[:72] or "(no git)"
