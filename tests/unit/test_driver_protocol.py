"""The driver protocol: every method has a conformance test, and the registry is the only door."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from sa_jobqueue.driver import DRIVERS, Driver, driver_for
from sa_jobqueue.errors import ConfigurationError
from tests.support.models import Job

SUITE = Path(__file__).resolve().parents[1] / "driver"


def _protocol_members() -> list[str]:
    """Every method of `Driver`, its family protocols' (sa_jobqueue/driver/protocol/) included."""
    return sorted(
        name
        for family in Driver.__mro__
        if family.__module__.startswith("sa_jobqueue.driver")
        for name, value in vars(family).items()
        if not name.startswith("_") and inspect.isfunction(value)
    )


def test_every_protocol_method_is_named_by_a_conformance_test():
    text = "\n".join(path.read_text() for path in SUITE.glob("test_*.py"))
    called = set(re.findall(r"driver\.(\w+)\(", text))
    missing = [name for name in _protocol_members() if name not in called]
    assert missing == [], f"no test in tests/driver/ calls {missing}"


def test_every_capability_is_checked_by_the_conformance_suite():
    text = (SUITE / "test_locks.py").read_text()
    capabilities = [name for name in Driver.__annotations__ if name.startswith("supports_")]
    assert capabilities
    assert [name for name in capabilities if f"driver.{name}" not in text] == []


def test_every_registered_driver_implements_every_protocol_method():
    for name, factory in DRIVERS.items():
        made = factory(Job, leases={}, default_lease=60.0)
        absent = [m for m in _protocol_members() if not callable(getattr(made, m, None))]
        assert absent == [], f"{name}: {absent}"


def test_every_registered_dialect_runs_the_conformance_suite_or_says_why_not():
    from tests.driver.conftest import ENGINES, NOT_HERE

    assert sorted(DRIVERS) == sorted([*ENGINES, *NOT_HERE])
    assert not set(ENGINES) & set(NOT_HERE)


def test_an_unknown_dialect_names_the_supported_ones_in_one_line():
    with pytest.raises(ConfigurationError) as raised:
        driver_for("oracle", Job)
    message = str(raised.value)
    assert "'oracle'" in message
    assert "postgresql" in message
    assert "\n" not in message


def test_the_driver_is_chosen_by_the_dialect_name():
    factory: object = DRIVERS["postgresql"]
    assert type(driver_for("postgresql", Job)) is factory


def test_a_driver_with_the_default_options_is_made_once_per_model():
    # An operator's cancel asks for one each call; building one builds every statement.
    assert driver_for("postgresql", Job) is driver_for("postgresql", Job)
    assert driver_for("postgresql", Job, kinds=["a"]) is not driver_for("postgresql", Job)
