"""`JsonFormatter`: one JSON object per line, with the job fields and any extra."""

from __future__ import annotations

import io
import json
import logging
import sys
from types import SimpleNamespace

import pytest

from sa_jobqueue.logs import JOB_FIELDS, JsonFormatter, configure_logging, job_fields


def _record(message: str = "job %d done", *args: object, **extra: object) -> logging.LogRecord:
    logger = logging.getLogger("sa_jobqueue.test")
    return logger.makeRecord(
        "sa_jobqueue.test", logging.INFO, __file__, 1, message, args or (7,), None, extra=extra
    )


def test_a_job_line_carries_the_job_fields_in_order():
    job = SimpleNamespace(id=7, kind="send_receipt", queue="mail", attempts=2)
    fields = job_fields("failed", job, "host:1:abc", duration=0.0125, error="Boom: x\ntrace")
    line = JsonFormatter().format(_record(**fields))
    assert "\n" not in line
    parsed = json.loads(line)
    assert list(parsed)[:4] == ["time", "level", "logger", "message"]
    assert parsed["message"] == "job 7 done"
    assert parsed["time"].endswith("Z")
    assert parsed["time"][10] == "T"
    assert [key for key in parsed if key in JOB_FIELDS] == list(JOB_FIELDS)
    assert parsed["job_id"] == 7
    assert parsed["duration_ms"] == 12.5
    assert parsed["error"] == "Boom: x"  # the first line; last_error has the rest


def test_other_extras_are_kept_and_unserialisable_values_become_text():
    parsed = json.loads(JsonFormatter().format(_record(tenant="acme", obj=object())))
    assert parsed["tenant"] == "acme"
    assert parsed["obj"].startswith("<object object")
    assert "job_id" not in parsed  # absent fields are left out, not null


def test_exceptions_stay_on_one_line():
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        record = logging.getLogger("x").makeRecord(
            "x", logging.ERROR, __file__, 1, "oops", (), sys.exc_info()
        )
    line = JsonFormatter().format(record)
    assert "\n" not in line
    assert "ValueError: bad\nvalue" in json.loads(line)["exception"]


def test_configure_logging_installs_one_handler_of_the_format(monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging("INFO", "json")
        logging.getLogger("sa_jobqueue.worker").info("hello %s", "there", extra={"job_id": 1})
        assert json.loads(stream.getvalue())["message"] == "hello there"
        with pytest.raises(ValueError, match="'text' or 'json'"):
            configure_logging("INFO", "xml")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
