"""Which server URL the plugin takes: its option, a project's --database-url, DATABASE_URL."""

from __future__ import annotations

import pytest

from sa_jobqueue.pytest_plugin import OPTION, configured_url


class Options:
    """What `configured_url` asks of a pytest config: ``getoption``."""

    def __init__(self, **given: str | None) -> None:
        self.given = given

    def getoption(self, name: str, default: object = None) -> object:
        return self.given.get(name, default)


@pytest.mark.parametrize(
    ("options", "environment", "expected"),
    [
        ({OPTION: "postgresql://a", "--database-url": "postgresql://b"}, "postgresql://c", "a"),
        ({"--database-url": "postgresql://b"}, "postgresql://c", "b"),
        ({OPTION: None, "--database-url": None}, "postgresql://c", "c"),
        ({OPTION: "", "--database-url": ""}, "postgresql://c", "c"),
        ({}, None, None),
        ({}, "", None),
    ],
)
def test_the_first_url_given_wins(monkeypatch, options, environment, expected):
    if environment is None:
        monkeypatch.delenv("DATABASE_URL", raising=False)
    else:
        monkeypatch.setenv("DATABASE_URL", environment)
    url = configured_url(Options(**options))  # type: ignore[arg-type]
    assert url == (None if expected is None else f"postgresql://{expected}")
