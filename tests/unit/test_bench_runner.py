"""The bench runner's table of scenarios matches bench/scenarios/, and each scenario parses.

No database: these read the modules `python -m bench` would run, so a scenario added
without its registry line, or a ``QUICK`` option its parser does not know, fails here
rather than halfway through `make bench`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

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


def _verdict(**fields: object) -> Any:
    defaults: dict[str, object] = dict(
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
        python="3.11",
    )
    return _module("bench.targets").Verdict(**{**defaults, **fields})


def test_the_targets_table_has_a_column_per_database_and_python() -> None:
    targets = _module("bench.targets")
    verdict = _verdict()
    found = {(verdict.target, "postgresql", "3.11"): verdict}
    table = targets.table(found, ["postgresql", "sqlite"], ["3.11", "3.13"])
    assert table.splitlines()[0] == (
        "| item and target | goal | postgresql, Python 3.11 | postgresql, Python 3.13 "
        "| sqlite, Python 3.11 | sqlite, Python 3.13 | scenario |"
    )
    row = next(line for line in table.splitlines() if line.startswith("| 3 wake-up p50 "))
    assert row == (
        "| 3 wake-up p50 | <= 3 ms | 2.50 ms held (load 1.00, 12:00:00 UTC) | not measured "
        "| not measured | not measured | latency |"
    )


def test_a_python_with_figures_gets_its_column_unasked() -> None:
    targets = _module("bench.targets")
    verdict = _verdict(python="3.13", command="python -m bench --python 3.13")
    table = targets.table(
        {(verdict.target, "postgresql", "3.13"): verdict}, ["postgresql"], ["3.11"]
    )
    assert "| postgresql, Python 3.11 | postgresql, Python 3.13 |" in table.splitlines()[0]
    assert "Command: `python -m bench --python 3.13`" in table


def test_a_target_not_measured_says_why_in_its_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    targets = _module("bench.targets")
    monkeypatch.setattr(targets, "FILE", tmp_path / "targets.jsonl")
    with targets.measuring("peers", "postgresql"):
        line = targets.unmeasured(
            "8 drain / PGQueuer at concurrency 16", "pgqueuer>=1.6 does not install", python="3.13"
        )
    assert line.endswith("not measured on 3.13: pgqueuer>=1.6 does not install")
    found = targets.read()
    table = targets.table(found, ["postgresql"], ["3.13"])
    start = "| 8 drain / PGQueuer at concurrency 16 "
    row = next(line for line in table.splitlines() if line.startswith(start))
    assert "| not measured on 3.13: pgqueuer>=1.6 does not install |" in row
    assert "postgresql, Python 3.13: 0 of" in table


def test_a_verdict_records_the_python_it_ran_on_and_old_lines_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    targets = _module("bench.targets")
    pythons = _module("bench.support.pythons")
    monkeypatch.setattr(targets, "FILE", tmp_path / "targets.jsonl")
    # A line written before verdicts carried a Python: the runner's own.
    targets.FILE.write_text(
        '{"target": "3 wake-up p99", "figure": 9.0, "goal": 10.0, "unit": " ms", '
        '"at_most": true, "held": true, "load": 2.0, "scenario": "latency", '
        '"database": "postgresql", "at": "11:00:00"}\n'
    )
    mark = targets.mark()
    targets.record("3 wake-up p50", 2.0, 3.0, unit=" ms", at_most=True)
    assert targets.since(mark) == {("3 wake-up p50", "postgresql", pythons.version())}
    assert set(targets.read()) == {
        ("3 wake-up p99", "postgresql", pythons.version()),
        ("3 wake-up p50", "postgresql", pythons.version()),
    }


def test_a_scenario_failing_in_the_second_python_leaves_its_targets_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real child run (this interpreter standing in for the second one) against a port
    # where no server listens: it fails before any verdict, as a scenario that breaks does.
    runner = _module("bench.__main__")
    targets = _module("bench.targets")
    pythons = _module("bench.support.pythons")
    database = _module("bench.support.database").Database
    monkeypatch.setattr(targets, "FILE", tmp_path / "targets.jsonl")
    other = pythons.Interpreter("9.9", Path(sys.executable))
    url = "postgresql+psycopg://nobody@127.0.0.1:9/none"
    status = runner.second(other, "drain_limit", database.from_url(url), ["--reps", "1"], True)
    assert status != 0
    found = targets.read()
    for target in (
        "7 lease drain / raw loop at concurrency 1",
        "7 lease drain / raw loop at concurrency 32",
    ):
        assert found[(target, "postgresql", "9.9")].reason.startswith("the scenario failed there")


def test_a_missing_second_python_is_refused_with_what_to_do() -> None:
    pythons = _module("bench.support.pythons")
    with pytest.raises(SystemExit, match="make bench-pythons"):
        pythons.resolve("2.9")
    with pytest.raises(SystemExit, match="the runner's own"):
        pythons.resolve(sys.executable)


def test_a_scenarios_own_only_option_reaches_it_after_its_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # drain_beside's --only {drain,move}, not the runner's --only A,B of the suite.
    runner = _module("bench.__main__")
    with pytest.raises(SystemExit):
        runner.main(["drain_beside", "--only", "neither"])
    error = capsys.readouterr().err
    assert "python -m bench drain_beside: error: argument --only" in error
    assert "'drain', 'move'" in error


def test_a_history_row_goes_under_its_tables_last_row_not_under_the_notes(tmp_path: Path) -> None:
    add_row = _module("bench.support.results").add_row
    history = tmp_path / "history.md"
    header = "# History\n\n| when | figure |\n|---|---|\n"
    add_row(history, header, "| 1 | 10 |\n")
    history.write_text(history.read_text() + "\nA note under the table.\n")
    add_row(history, header, "| 2 | 20 |")
    assert history.read_text() == (
        "# History\n\n| when | figure |\n|---|---|\n| 1 | 10 |\n| 2 | 20 |\n"
        "\nA note under the table.\n"
    )
