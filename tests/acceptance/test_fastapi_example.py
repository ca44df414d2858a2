"""examples/fastapi_app.py: requests enqueue in their own transaction, and the worker
embedded in the app's lifespan runs the jobs (async and sync) on the app's loop.

The app runs in-process under httpx's ASGITransport, with its lifespan entered
around the requests (as a server would), against a scratch database.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.pool import NullPool

from sa_jobqueue.testing import scratch_database

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fastapi_app.py"


def _load(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("examples_fastapi_app", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    monkeypatch.delenv("DATABASE_URL", raising=False)  # no module-level app
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("driver", ["asyncpg", "psycopg"])
def test_fastapi_app_enqueues_in_the_request_and_its_embedded_worker_runs_the_jobs(
    server_url, monkeypatch, driver
):
    example = _load(monkeypatch)
    with scratch_database(server_url, prefix="sa_jobqueue_fastapi") as url:
        async_url = make_url(url).set(drivername=f"postgresql+{driver}")
        app = example.create_app(async_url.render_as_string(hide_password=False), concurrency=4)

        async def scenario() -> dict[str, Any]:
            transport = httpx.ASGITransport(app=app)
            async with (
                app.router.lifespan_context(app),
                httpx.AsyncClient(transport=transport, base_url="http://app") as client,
            ):
                placed = await client.post(
                    "/orders", json={"id": 4, "customer": "dave", "total_cents": 2500}
                )
                assert placed.status_code == 201, placed.text
                assert len(placed.json()["jobs"]) == 3
                declined = await client.post(
                    "/orders",
                    json={"id": 5, "customer": "erin", "total_cents": 700, "decline": True},
                )
                assert declined.status_code == 402
                order: dict[str, Any] = {}
                for _ in range(1500):  # up to ~30 s on a loaded machine
                    order = (await client.get("/orders/4")).json()
                    if order["invoice_cents"] and order["receipts"] and order["crm_synced"]:
                        break
                    await asyncio.sleep(0.02)
                stats = (await client.get("/jobs/stats")).json()
                missing = (await client.get("/orders/5")).status_code
                worker = app.state.worker
            # The lifespan has ended: the worker stopped gracefully.
            return {"order": order, "stats": stats, "missing": missing, "worker": worker}

        result = asyncio.run(scenario())
        engine = create_engine(url, poolclass=NullPool)
        with engine.connect() as conn:
            jobs = conn.execute(text("SELECT kind, status, attempts FROM jobs ORDER BY kind"))
            rows = [tuple(r) for r in jobs]
        engine.dispose()

    assert result["order"] == {
        "order": 4,
        "invoice_cents": 2500,
        "receipts": 1,
        "crm_synced": True,
    }
    assert result["missing"] == 404  # the declined order left no order and no job
    assert rows == [
        ("create_invoice", "done", 1),
        ("send_receipt", "done", 1),
        ("sync_crm", "done", 1),
    ]
    by_queue = {q["queue"]: q for q in result["stats"]}
    assert (
        sum(q["done"] for q in by_queue.values()) + sum(q["running"] for q in by_queue.values())
        == 3
    )
    assert result["worker"].processed == 3
