"""Long operator commands: dry runs, bulk retry/cancel, progress bars on a real pseudo-terminal.

The pty tests run ``sa-jobqueue`` as a subprocess whose stdout is a pseudo-terminal
(`pty.openpty`), as a person's shell gives it, and read what it draws.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
from collections.abc import Callable

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from sa_jobqueue.cli import main

FILL = """
INSERT INTO jobs (queue, kind, status, attempts, max_attempts, last_error, finished_at)
SELECT :queue, 'k', :status, 1, 1, 'boom',
       CASE WHEN :status IN ('done', 'failed', 'cancelled') THEN now() - interval '2 days' END
FROM generate_series(1, :n)
"""


def fill(engine, n: int, status: str, queue: str = "q") -> None:
    with engine.begin() as conn:
        conn.execute(text(FILL), {"n": n, "status": status, "queue": queue})


def count(engine, where: str = "true") -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM jobs WHERE {where}")).scalar_one())


@pytest.fixture
def run(committed, database_url):
    def invoke(*args: str):
        return CliRunner().invoke(main, list(args), env={"DATABASE_URL": database_url})

    return invoke


def on_pty(
    database_url: str, *args: str, until: Callable[[str], bool] | None = None, timeout: float = 120
) -> tuple[int, str]:
    """Run ``sa-jobqueue ARGS`` with a pseudo-terminal as stdin/stdout/stderr.

    Returns its exit code and everything it wrote. With `until`, send SIGINT (Ctrl-C)
    once the output so far satisfies it.
    """
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "sa_jobqueue.cli", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**os.environ, "DATABASE_URL": database_url, "COLUMNS": "120"},
        close_fds=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    interrupted = False
    try:
        while True:
            ready, _, _ = select.select([master], [], [], timeout)
            if not ready:
                raise AssertionError(f"no output for {timeout}s: {b''.join(chunks)!r}")
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal (it exited)
                break
            if not data:
                break
            chunks.append(data)
            if until is not None and not interrupted and until(b"".join(chunks).decode()):
                process.send_signal(signal.SIGINT)
                interrupted = True
    finally:
        os.close(master)
        code = process.wait(timeout=60)
    return code, b"".join(chunks).decode(errors="replace")


@pytest.mark.slow
def test_prune_dry_run_counts_a_million_finished_jobs_and_deletes_none(run, committed):
    fill(committed, 1_000_000, "done")
    fill(committed, 3, "pending")
    result = run("prune", "--older-than", "1d", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == (
        "would delete 1000000 jobs finished more than 1d ago "
        "(done 1000000, failed 0, cancelled 0); dry run: nothing deleted"
    )
    as_json = json.loads(run("prune", "--older-than", "1d", "--dry-run", "--json").stdout)
    assert as_json == {
        "would_delete": {"done": 1_000_000, "failed": 0, "cancelled": 0},
        "total": 1_000_000,
    }
    assert count(committed) == 1_000_003
    # Not a terminal (CliRunner's pipe): a real prune prints its summary and no bar.
    pruned = run("prune", "--older-than", "1d", "--status", "done", "--batch-size", "50000")
    assert pruned.stdout.strip() == (
        "deleted 1000000 jobs finished more than 1d ago (done 1000000) in 21 batches"
    )
    assert count(committed) == 3


def test_prune_draws_a_progress_bar_on_a_terminal(committed, database_url):
    fill(committed, 3000, "done")
    code, output = on_pty(database_url, "prune", "--older-than", "1d", "--batch-size", "500")
    assert code == 0, output
    assert "pruning 3,000 jobs" in output
    assert "100%" in output
    assert "3000/3000" in output
    assert output.rstrip().endswith(
        "deleted 3000 jobs finished more than 1d ago (done 3000, failed 0, cancelled 0) "
        "in 9 batches"  # done: 6 full, 1 empty; failed, cancelled: 1 empty each
    )
    assert count(committed) == 0


def test_a_bulk_retry_draws_its_bar_on_a_terminal_and_none_with_json(committed, database_url):
    fill(committed, 1200, "failed")
    code, output = on_pty(database_url, "retry", "--all", "--batch-size", "500", "--json")
    assert code == 0, output
    assert "%" not in output  # --json: no bar, only the object
    assert json.loads(output)["changed"] == 1200
    fill(committed, 1200, "cancelled", queue="other")
    code, output = on_pty(database_url, "retry", "--all", "--queue", "other", "--batch-size", "500")
    assert code == 0, output
    assert "retry 1,200 jobs" in output
    assert "100%" in output
    assert output.rstrip().endswith("retried 1200 jobs in 3 batches")
    assert count(committed, "status = 'pending'") == 2400


def test_retry_and_cancel_all_with_a_dry_run_first(run, committed):
    fill(committed, 40, "failed", queue="mail")
    fill(committed, 5, "cancelled", queue="mail")
    fill(committed, 7, "pending", queue="pdf")
    dry = run("retry", "--all", "--queue", "mail", "--status", "failed", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert dry.stdout.strip() == "would retry 40 jobs (dry run: nothing changed)"
    assert count(committed, "status = 'failed'") == 40
    done = run("retry", "--all", "--queue", "mail", "--batch-size", "16")
    assert done.stdout.strip() == "retried 45 jobs in 3 batches"
    assert count(committed, "status = 'pending'") == 52
    as_json = json.loads(run("cancel", "--all", "--queue", "pdf", "--dry-run", "--json").stdout)
    assert (as_json["action"], as_json["changed"], as_json["dry_run"]) == ("cancel", 7, True)
    assert run("cancel", "--all", "--queue", "pdf").stdout.strip() == "cancelled 7 jobs in 1 batch"
    assert count(committed, "status = 'cancelled'") == 7


def test_a_dry_run_by_ids_says_which_would_be_left_alone(run, committed):
    fill(committed, 2, "failed")
    fill(committed, 1, "running")
    with committed.connect() as conn:
        ids = [str(i) for i in conn.execute(text("SELECT id FROM jobs ORDER BY id")).scalars()]
    result = run("retry", *ids, "424242", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == (
        "would retry 2 jobs (dry run: nothing changed); left alone: 1 running, 1 missing"
    )
    assert count(committed, "status = 'failed'") == 2


def one_line_error(result, code: int) -> str:
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return str(lines[0])


def test_bulk_commands_refuse_what_makes_no_sense_in_one_line(run, committed):
    fill(committed, 2, "running")
    assert "cannot retry running jobs" in one_line_error(
        run("retry", "--all", "--status", "running"), 2
    )
    assert "cannot cancel done jobs" in one_line_error(
        run("cancel", "--all", "--status", "done"), 2
    )
    assert "status must be one of" in one_line_error(run("cancel", "--all", "--status", "lost"), 2)
    assert "not both" in one_line_error(run("retry", "1", "--all"), 2)
    assert "go with --all" in one_line_error(run("cancel", "1", "--queue", "q"), 2)
    assert "go with --all" in one_line_error(run("retry", "1", "--status", "failed"), 2)
    assert count(committed, "status = 'running'") == 2


def test_jobs_list_says_how_many_more_match(run, committed):
    fill(committed, 25, "failed")
    fill(committed, 3, "pending")
    listed = run("jobs", "list", "--status", "failed", "--limit", "10")
    assert listed.exit_code == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == 1 + 10 + 1
    assert lines[-1] == "10 shown; 15 more match (--limit N shows more)"
    every = run("jobs", "list", "--status", "pending")
    assert "more match" not in every.stdout
    assert len(json.loads(run("jobs", "list", "--limit", "5", "--json").stdout)) == 5


def test_stats_watch_redraws_in_place_until_ctrl_c(committed, database_url):
    fill(committed, 3, "pending", queue="mail")
    code, output = on_pty(
        database_url,
        "stats",
        "--watch",
        "--interval",
        "0.2",
        until=lambda seen: seen.count("Ctrl-C to stop") >= 3,
    )
    assert code == 0, output
    assert "Traceback" not in output
    assert "KeyboardInterrupt" not in output
    assert output.count("\x1b[H") >= 3  # each refresh starts at the top of the screen
    assert "mail" in output
