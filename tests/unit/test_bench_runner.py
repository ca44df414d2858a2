"""The bench runner's table of scenarios matches bench/scenarios/, and each scenario parses.

No database: these read the modules `python -m bench` would run, so a scenario added
without its registry line, or a ``QUICK`` option its parser does not know, fails here
rather than halfway through `make bench`.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _module(name: str) -> ModuleType:
    # By name, not statically: mypy checks tests/, and bench/ is no typed package.
    return importlib.import_module(name)


def test_every_scenario_module_is_in_the_runners_table_and_nothing_else() -> None:
    scenarios = _module("bench.scenarios").SCENARIOS
    files = {p.stem for p in (BENCH / "scenarios").glob("*.py") if p.stem != "__init__"}
    assert set(scenarios) == files


@pytest.mark.parametrize("name", sorted(_module("bench.scenarios").SCENARIOS))
def test_a_scenarios_quick_and_suite_options_parse(name: str) -> None:
    runner = _module("bench.__main__")
    module = runner.scenario(name)
    assert callable(module.main)
    parser = runner.parser_of(name, module)
    suite = _module("bench.scenarios").SCENARIOS[name] or []
    assert isinstance(parser.parse_args([*module.QUICK, *suite]), argparse.Namespace)


def test_every_target_names_a_scenario_that_exists() -> None:
    scenarios = _module("bench.scenarios").SCENARIOS
    expected = _module("bench.targets").EXPECTED
    assert set(expected.values()) <= set(scenarios)


def test_the_targets_table_has_a_column_per_database() -> None:
    targets = _module("bench.targets")
    verdict = targets.Verdict(
        target="3 wake-up p50",
        figure=2.5,
        goal=3.0,
        unit=" ms",
        at_most=True,
        held=True,
        load=1.0,
        scenario="latency",
        database="postgresql",
        at="12:00:00",
    )
    table = targets.table({(verdict.target, "postgresql"): verdict}, ["postgresql", "sqlite"])
    assert table.splitlines()[0] == "| item and target | goal | postgresql | sqlite | scenario |"
    row = next(line for line in table.splitlines() if line.startswith("| 3 wake-up p50 "))
    assert row == (
        "| 3 wake-up p50 | <= 3 ms | 2.50 ms held (load 1.00, 12:00:00 UTC) | not measured "
        "| latency |"
    )
