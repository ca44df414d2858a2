"""`make demo` runs: real worker processes play the lesson and the final state is right."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_demo_plays_the_lesson_end_to_end(server_url):
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py")],
        env={**os.environ, "DATABASE_URL": server_url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for expected in [
        "order 5 rolled back: its job never existed",
        "kill -9 worker A",
        "lease expired, now pending",
        "render_pdf attempt 2 done",
        "create_invoice attempt 2 done",
        "sync_crm attempt 2 failed, retrying in",
        "import_feed attempt 3 failed for good (dead letter)",
        "SIGTERM worker B: graceful exit 0",
        "order 3: 1 invoice(s), 9900 cents",
        "checked: one invoice per order",
    ]:
        assert expected in out, f"{expected!r} missing from:\n{out}"
    assert "Traceback" not in result.stderr
