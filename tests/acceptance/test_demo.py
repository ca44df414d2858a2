"""`make demo` replays the lesson: real worker processes, each outcome read back and printed.

The demo's own tables are what this reads: each lesson outcome must appear as the row
the demo read from the database at that step (and the demo fails itself when a check
of the database does not hold).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.pool import NullPool

ROOT = Path(__file__).resolve().parents[2]


def row(*cells: str) -> str:
    """A regex for one printed table row that starts with `cells` (regexes), in order."""
    return r"^  " + r"\s+".join(cells) + r"(\s|$)"


def expect(out: str, pattern: str, after: str | None = None) -> None:
    """`pattern` matches a line of `out` (below the first line holding `after`, if given)."""
    text_ = out
    if after is not None:
        assert after in out, f"{after!r} missing from:\n{out}"
        text_ = out[out.index(after) :]
    assert re.search(pattern, text_, re.MULTILINE), f"{pattern!r} not found in:\n{text_}"


def section(out: str, title: str) -> str:
    """The lines of `out` from the step titled `title` to the next blank line."""
    assert title in out, f"{title!r} missing from:\n{out}"
    return out[out.index(title) :].split("\n\n", 1)[0]


@pytest.fixture
def demo_run(server_url):
    """Run examples/demo.py into a database of this test's own; drop it afterwards."""
    name = f"sa_jobqueue_demo_test_{uuid.uuid4().hex[:8]}"
    admin = create_engine(server_url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        result = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "demo.py"), "--database", name],
            env={**os.environ, "DATABASE_URL": server_url},
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        yield result, make_url(server_url).set(database=name).render_as_string(False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.mark.slow
def test_demo_replays_each_outcome_of_the_lesson(demo_run):
    result, url = demo_run
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    out = result.stdout

    # The seed's exact rows: orders 1-3; jobs 1-3 pending; 4 and 5 running, leases
    # expired five minutes ago, job 5 at 3 of 3 attempts.
    assert "The seed\n" in out, out
    seed = out[out.index("The seed\n") : out.index("Leases, step 2")]
    for cells in [("1", "alice", "4200"), ("2", "bob", "1500"), ("3", "carol", "9900")]:
        expect(seed, row(*cells))
    expect(seed, row("1", "send_receipt", r'\{"order_id": 1\}', "pending", "0/20", "now"))
    expect(seed, row("2", "send_receipt", r'\{"order_id": 2\}', "pending", "0/20", "now"))
    expect(seed, row("3", "create_invoice", r'\{"order_id": 3\}', "pending", "0/20", "now"))
    expect(
        seed,
        r'^  4\s+send_receipt\s+\{"order_id": 3\}\s+running\s+1/20\s+-10 min\s+-5 min\s+\S+$',
    )
    expect(
        seed,
        r'^  5\s+sync_crm\s+\{"customer": "carol"\}\s+running\s+3/3\s+-10 min\s+-5 min\s+\S+$',
    )
    # attempts 1/20 is explained: max_attempts defaults to 20.
    expect(seed, r"attempts N/M: claimed N times of max_attempts M")
    expect(seed, r"default max_attempts, 20")

    # Which leases expired, then the reclaim: job 4 back to pending, job 5 to failed.
    expired = section(out, "Leases, step 2")
    expect(expired, row("4", "send_receipt", "1", "true"))
    expect(expired, row("5", "sync_crm", "3", "true"))
    reclaim = section(out, "Leases, step 3")
    expect(reclaim, row("4", "send_receipt", "pending", "1", "lease expired.*"))
    expect(reclaim, row("5", "sync_crm", "failed", "3", "lease expired.*"))
    expect(reclaim, r"worker A logged: job 5 sync_crm attempt 3 lease expired, now failed")

    # Job 4's next claim is attempt 2 (worker B; its mailer takes a second).
    claim = section(out, "Leases, step 4")
    expect(claim, row("4", "send_receipt", r'\{"order_id": 3\}', "2", "(running|done)", "B"))

    # Job 4's first worker reports done late: no row changes, B's attempt 2 stands.
    fencing = section(out, "Leases, step 5")
    expect(fencing, r"^  No rows$")
    expect(fencing, row("4", "send_receipt", "2", "(running|done)", "B"))
    done = section(out, "Leases, step 6")
    expect(done, row("4", "send_receipt", "done", "2", "B"))

    # The invoice of order 3: absent while uncommitted and after the kill -9, then once.
    writing = section(out, "Exactly-once processing, steps 1-2")
    expect(writing, row("3", "create_invoice", r'\{"order_id": 3\}', "1", "running", "A"))
    expect(writing, r"^  No rows$")
    crash = section(out, "Exactly-once processing, step 3")
    expect(crash, r"kill -9 worker A \(pid \d+, exit -9\)")
    expect(crash, r"Invoices for order 3:\n  No rows$")
    # Recovered at once by worker B of the same host: A's liveness file was unlocked.
    expect(crash, row("3", "create_invoice", "1", "pending", "A"))
    expect(crash, r"worker B logged: job 3 create_invoice attempt 1 lease expired, now pending")
    recovered = section(out, "Exactly-once processing, steps 4-6")
    expect(recovered, row("3", "create_invoice", "2", "done", "C"))
    once = section(out, "Exactly-once processing, step 7")
    expect(once, row("3", "9900", "done"))
    expect(section(out, "Invoices per order"), row("3", "1", "9900"))

    # Order 4 and its job committed together; a rolled-back order 5 left neither row.
    expect(
        section(out, "Enqueue with your data: order 4"),
        row("4", "dave", "2500", "6", "send_receipt", r'\{"order_id": 4\}'),
    )
    expect(section(out, "LISTEN / NOTIFY"), row("6", "send_receipt", "done", "1", r"\w+"))
    rollback = section(out, "Enqueue with your data, the other half")
    expect(rollback, r"Orders with id 5:\n  No rows$")
    expect(rollback, r"Jobs for order 5:\n  No rows$")

    # One event fanned out to three consumers, each on its own (sync_crm retried).
    fan_out = section(out, "One event, many consumers")
    expect(fan_out, row("7", "send_receipt", "done", "1", "-"))
    expect(fan_out, row("8", "create_invoice", "done", "1", "-"))
    # A done job keeps an earlier attempt's error, named by its attempt (issue 24, item 17).
    expect(fan_out, row("9", "sync_crm", "done", "2", "attempt 1: TimeoutError.*"))

    # Beyond the lesson: the same fence against a real worker stopped past its lease.
    stalled = section(out, "Beyond the lesson: the fence of step 5")
    expect(stalled, r"SIGSTOP worker D")
    expect(stalled, r"worker C logged: job 12 render_pdf attempt 1 lease expired, now pending")
    expect(stalled, r"worker D logged: job 12 render_pdf attempt 1 finished but its lease was lost")
    expect(stalled, row("12", "render_pdf", "2", "(running|done)", "E"), after="late done")
    expect(stalled, row("12", "render_pdf", "2", "done", "E"))

    # Job ids contiguous; every check of the database held; no attempt claimed twice.
    final = section(out, "The jobs table at the end")
    ids = [int(i) for i in re.findall(r"^  (\d+)\s", final, re.MULTILINE)]
    assert ids == list(range(1, 13)), final
    expect(final, r"Job ids 1-12, none skipped\.")
    checked = section(out, "Checked in the database")
    assert "FAIL" not in checked, checked
    assert len(re.findall(r"^  ok  ", checked, re.MULTILINE)) >= 15, checked
    expect(out, r"none of them by two workers")

    # The database is left for inspection, with a hint for psql, the CLI and the dashboard.
    expect(out, r"^  psql:\s+psql \S+ -c ", after="left for inspection")
    expect(out, r"^  CLI:\s+\S*sa-jobqueue jobs list --database-url ", after="left for inspection")
    expect(out, r"^  dashboard:\s+\S*sa-jobqueue dashboard --database-url .*make demo-dashboard")
    listed = subprocess.run(
        [sys.executable, "-m", "sa_jobqueue.cli", "jobs", "list", "--database-url", url],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert re.search(r"^5\s+default\s+sync_crm\s+failed\s+3/3", listed, re.MULTILINE), listed
