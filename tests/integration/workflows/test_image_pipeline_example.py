"""examples/image_pipeline.py runs its workflow to the end, in the order it promises."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from sa_jobqueue.testing import scratch_database

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "image_pipeline.py"


def _load(monkeypatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("examples_image_pipeline", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # Mapped[...] resolves through it
    spec.loader.exec_module(module)
    return module


def test_image_pipeline_fetches_resizes_publishes_then_notifies(server_url, monkeypatch):
    example = _load(monkeypatch)
    with scratch_database(server_url, prefix="sa_jobqueue_pipeline") as url:
        lines = example.main(url)
    assert lines[0] == "fetch https://example.com/cat.jpg"
    assert sorted(lines[1:5]) == ["resize 1280", "resize 160", "resize 320", "resize 640"]
    assert lines[5] == "publish [160, 320, 640, 1280] ({'done': 4})"
    assert lines[6].startswith("notify: publish job ")
    assert lines[6].endswith(" ended done")
    assert lines[7] == "upload 1 published: 160,320,640,1280"
    assert len(lines) == 8
