"""Run a docs page the way its reader would: write its files, paste its shell blocks in order.

A page is a list of fenced blocks. What each one means to the test:

- a block with a title (```` ```python title="models.py" ````; Material shows the title
  as the file name) is a file: it is written, relative to the shell's current directory,
  exactly as shown;
- a ``bash`` block is pasted into one terminal: it runs with the directory and the
  exported variables the previous block left (``cd`` and ``. .venv/bin/activate`` carry
  over), and fails the test if any command fails;
- any other block (``sql``, ``text``, ``ini`` without a title, ...) is for reading only.

An HTML comment right before a block (invisible on the site) adjusts what the test does:

- ``<!-- test: database -->``: instead of the block (which points ``DATABASE_URL`` at a
  database of the reader's), export the URL of an empty database the test created (a
  new one each time); ``database="VAR"`` exports it as ``VAR``, and ``pgbouncer="VAR2"``
  also exports as ``VAR2`` the URL of the same database through a real PgBouncer in
  transaction pooling; a run `play`ed ``as_written`` runs the block itself (getting
  started's SQLite file) instead;
- ``<!-- test: expect="text" -->``: the block's output contains ``text`` (repeatable);
  ``absent="text"``: it does not;
- ``<!-- test: background wait="text" -->``: the block is one long-running command (a
  worker): start it, wait until its output contains every ``wait`` text, then press
  Ctrl+C (SIGINT to its process group; ``signal="TERM"`` sends what a process manager
  sends) and require a clean exit; ``expect`` applies to its whole output.

A Python or shell block that can be neither run nor written is an error: nothing on a
tested page is decoration.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

RUNNABLE = frozenset({"bash"})
CODE = frozenset({"python", "py", "bash", "sh", "shell", "console", "pycon"})

_FENCE = re.compile(r"^(?P<fence>```+|~~~+)(?P<info>[^\n]*)$")
_MARKER = re.compile(r"^<!--\s*test:(?P<options>.*?)-->\s*$")
_OPTION = re.compile(r'(\w+)(?:="([^"]*)")?')
_TITLE = re.compile(r'title="([^"]+)"')


@dataclass(frozen=True)
class Block:
    """One fenced block of a page, with what the test does with it."""

    page: Path
    line: int
    lang: str
    title: str | None
    code: str
    options: dict[str, list[str]] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line}"

    @property
    def role(self) -> str:
        """``file``, ``database``, ``background``, ``shell`` or ``read``."""
        if self.title is not None:
            return "file"
        if "database" in self.options:
            return "database"
        if self.lang in RUNNABLE:
            return "background" if "background" in self.options else "shell"
        if self.lang in CODE:
            raise ValueError(
                f"{self.where}: a {self.lang} block that is neither a file (title=...) nor a "
                "bash block; the docs test cannot run it"
            )
        return "read"


def parse(page: Path) -> list[Block]:
    """The fenced blocks of `page`, in order, with the marker before each one."""
    lines = page.read_text().splitlines()
    blocks: list[Block] = []
    options: dict[str, list[str]] = {}
    i = 0
    while i < len(lines):
        marker = _MARKER.match(lines[i].strip())
        fence = _FENCE.match(lines[i])
        if marker:
            options = {}
            for key, value in _OPTION.findall(marker["options"]):
                options.setdefault(key, []).append(value)
        elif fence:
            info = fence["info"].strip()
            lang = info.split()[0] if info else ""
            title = _TITLE.search(info)
            end = i + 1
            while end < len(lines) and lines[end].rstrip() != fence["fence"]:
                end += 1
            code = "\n".join(lines[i + 1 : end]) + "\n"
            blocks.append(Block(page, i + 1, lang, title[1] if title else None, code, options))
            options = {}
            i = end
        elif lines[i].strip():
            options = {}  # a marker applies to the block right after it only
        i += 1
    return blocks


def files(blocks: list[Block]) -> dict[str, str]:
    """The files a page writes, by path, with their final content."""
    return {b.title: b.code for b in blocks if b.role == "file" and b.title}


@dataclass
class Shell:
    """One terminal: a current directory and exported variables carried between blocks."""

    cwd: Path
    env: dict[str, str]
    state: Path  # where a block leaves its directory and variables for the next one
    transcript: list[str] = field(default_factory=list)

    def run(self, script: str, *, timeout: float = 300) -> str:
        state = self.state
        wrapped = (
            "set -euo pipefail\n"
            f"{script}\n"
            f"pwd > {shlex.quote(str(state))}.cwd\n"
            f"env -0 > {shlex.quote(str(state))}.env\n"
        )
        done = subprocess.run(
            ["bash", "-c", wrapped],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
        )
        self.transcript.append(f"$ {script.strip()}\n{done.stdout}")
        if done.returncode != 0:
            raise AssertionError(
                f"exit {done.returncode}:\n$ {script.strip()}\n{done.stdout}\n" + self.history()
            )
        self.cwd = Path(Path(f"{state}.cwd").read_text().strip())
        raw = Path(f"{state}.env").read_text()
        self.env = dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)
        return done.stdout

    def background(
        self, command: str, *, wait: list[str], stop: str = "INT", timeout: float = 90
    ) -> str:
        """Start `command`, wait for every `wait` text in its output, then Ctrl+C it."""
        process = subprocess.Popen(
            ["bash", "-c", f"set -euo pipefail\nexec {command}"],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group, as a terminal's job
        )
        output: list[str] = []
        assert process.stdout is not None
        stream = process.stdout
        reader = threading.Thread(target=lambda: output.extend(stream), daemon=True)
        reader.start()
        deadline = time.monotonic() + timeout
        try:
            while not all(text in "".join(output) for text in wait):
                if process.poll() is not None or time.monotonic() > deadline:
                    reader.join(timeout=5)
                    raise AssertionError(
                        f"{command!r} never printed {wait}"
                        f" (exit {process.poll()}):\n{''.join(output)}\n" + self.history()
                    )
                time.sleep(0.05)
            os.killpg(process.pid, getattr(signal, f"SIG{stop}"))  # the reader's Ctrl+C
            code = process.wait(timeout=60)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        reader.join(timeout=5)
        stream.close()
        text = "".join(output)
        self.transcript.append(f"$ {command}   # then SIG{stop}\n{text}")
        if code != 0:
            raise AssertionError(f"{command!r} exited {code} after Ctrl+C:\n{text}")
        return text

    def history(self) -> str:
        return "--- earlier blocks ---\n" + "\n".join(self.transcript[-6:])


def play(
    blocks: list[Block],
    shell: Shell,
    *,
    new_database: Callable[[], str],
    pooled: Callable[[str], str] | None = None,
    as_written: bool = False,
) -> None:
    """Do what the page says, block by block, as its reader would.

    `new_database` makes an empty database and returns its URL; `pooled` returns a URL
    of the database at the URL it is given through a PgBouncer in transaction pooling.
    `as_written`: the ``database`` blocks run as they are, instead of `new_database`.
    """
    for block in blocks:
        output: str | None = None
        if block.role == "file":
            assert block.title is not None
            target = shell.cwd / block.title
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.code)
        elif block.role == "database" and as_written:
            output = shell.run(block.code)
        elif block.role == "database":
            url = new_database()
            shell.env[block.options["database"][-1] or "DATABASE_URL"] = url
            if "pgbouncer" in block.options:
                assert pooled is not None, f"{block.where}: this run has no PgBouncer"
                shell.env[block.options["pgbouncer"][-1]] = pooled(url)
        elif block.role == "shell":
            output = shell.run(block.code)
        elif block.role == "background":
            command = block.code.strip()
            if "\n" in command:
                raise ValueError(f"{block.where}: a background block holds one command")
            stop = block.options.get("signal", ["INT"])[-1]
            output = shell.background(command, wait=block.options.get("wait", []), stop=stop)
        for text in block.options.get("expect", []):
            assert output is not None, f"{block.where}: expect= on a block that prints nothing"
            assert text in output, f"{block.where}: {text!r} not in the output:\n{output}"
        for text in block.options.get("absent", []):
            assert output is not None, f"{block.where}: absent= on a block that prints nothing"
            assert text not in output, f"{block.where}: {text!r} in the output:\n{output}"
