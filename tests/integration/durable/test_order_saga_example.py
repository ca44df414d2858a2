"""examples/order_saga.py: each step once across four runs of its handler, then jobs.wait."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from sa_jobqueue.testing import scratch_database

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "order_saga.py"


def _load(monkeypatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("examples_order_saga", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # Mapped[...] resolves through it
    spec.loader.exec_module(module)
    return module


def test_the_saga_charges_once_reminds_ships_on_the_signal_and_asks_for_a_review(
    server_url, monkeypatch
):
    example = _load(monkeypatch)
    with scratch_database(server_url, prefix="sa_jobqueue_saga") as url:
        lines = example.main(url)
    assert lines == [
        "fulfil_order starts",
        "charged order 7 (key jobs:1)",
        "fulfil_order starts",  # the wait for "packed" timed out
        "reminded the warehouse about order 7",
        "fulfil_order starts",  # the warehouse's signal woke it
        "shipped order 7 as parcel PX-7",
        "fulfil_order starts",  # the review sleep ended
        "asked for a review of order 7",
        "job 1 done: {'charge': 'ch_7', 'parcel': 'PX-7'}",
    ]
