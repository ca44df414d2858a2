"""examples/orders.py runs, and leaves the rows it promises."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from sa_jobqueue.testing import scratch_database

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "orders.py"


def _load(monkeypatch) -> ModuleType:
    """Import examples/orders.py (not a package) as a module of its own."""
    spec = importlib.util.spec_from_file_location("examples_orders", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # SQLAlchemy resolves the Mapped[...] annotations through sys.modules.
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_orders_example_enqueues_beside_orders(server_url, capsys, monkeypatch):
    orders = _load(monkeypatch)
    with scratch_database(server_url, prefix="sa_jobqueue_example") as url:
        rows = orders.main(url)
        engine = create_engine(url, poolclass=NullPool)
        with engine.connect() as connection:
            customers = connection.execute(text("SELECT id, customer FROM orders ORDER BY id"))
            assert [tuple(r) for r in customers] == [
                (1, "alice"),
                (2, "bob"),
                (3, "carol"),
                (4, "dave"),
            ]
            stored = connection.scalar(text("SELECT count(*) FROM jobs"))
        engine.dispose()

    assert stored == len(rows) == 7
    by_order: dict[object, list[str]] = {}
    for row in rows:
        assert row["status"] == "pending"
        assert row["attempts"] == 0
        by_order.setdefault(row["payload"].get("order_id"), []).append(row["kind"])
    assert by_order == {
        1: ["send_receipt"],
        2: ["send_receipt"],
        3: ["create_invoice"],
        4: sorted(["send_receipt", "create_invoice", "sync_crm"]),  # inserted in key order
        None: ["sync_crm"],  # the plain-ORM job, keyed by customer
    }
    assert 5 not in by_order  # the rolled-back order left no job
    receipts = [r for r in rows if r["kind"] == "send_receipt"]
    assert {(r["queue"], r["max_attempts"]) for r in receipts} == {("mail", 5)}
    assert [r["idempotency_key"] for r in receipts] == [
        "order:1:send_receipt",
        "order:2:send_receipt",
        "order:4:send_receipt",
    ]

    printed = capsys.readouterr().out
    assert "order 5 rolled back: no order, no job" in printed
    assert "nothing added" in printed
    assert printed.count("send_receipt ") >= 3  # the table


@pytest.mark.slow
def test_orders_example_runs_as_a_script(server_url, tmp_path):
    env = {**os.environ, "DATABASE_URL": server_url}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("id "))
    assert header.split() == [
        "id",
        "queue",
        "kind",
        "payload",
        "status",
        "attempts",
        "idempotency_key",
    ]
    assert sum(1 for line in lines if " pending " in line) == 7
