"""Structured logs: one JSON object per line, and the job fields every job line carries.

`job_fields` gives each line about a job its ``extra=`` fields; `JsonFormatter` writes a
record as one JSON object per line (``--log-format json``). See docs/observability.md#logs.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Protocol

__all__ = [
    "JOB_FIELDS",
    "QUIET_LOGGERS",
    "JsonFormatter",
    "configure_logging",
    "job_fields",
    "log_job",
]

#: The fields a job line carries, in the order `JsonFormatter` writes them.
JOB_FIELDS = ("event", "job_id", "kind", "queue", "attempt", "worker_id", "duration_ms", "error")

# What every LogRecord has: anything else on a record came from ``extra=``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: Libraries that log INFO lines when imported or set up (Alembic's seven "setup plugin"
#: lines, when the application imports Flask-Migrate): `configure_logging` keeps them
#: below WARNING quiet unless the level is DEBUG, or the application set their level.
QUIET_LOGGERS = ("alembic",)
_quieted: set[str] = set()


class _Job(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def attempts(self) -> int: ...


def job_fields(
    event: str,
    job: _Job,
    worker_id: str,
    *,
    duration: float | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """The ``extra=`` of a log line about `job` (a claimed job): its `JOB_FIELDS`.

    `duration` is in seconds (written as ``duration_ms``); only the first line of
    `error` is kept. A job without a ``queue`` attribute (a swept row) has none.

    >>> from types import SimpleNamespace as Job
    >>> job_fields("done", Job(id=7, kind="k", queue="q", attempts=1), "w", duration=0.0125)
    {'event': 'done', 'job_id': 7, 'kind': 'k', 'queue': 'q', 'attempt': 1, 'worker_id': 'w', \
'duration_ms': 12.5}
    """
    fields: dict[str, Any] = {
        "event": event,
        "job_id": job.id,
        "kind": job.kind,
        "queue": getattr(job, "queue", None),
        "attempt": job.attempts,
        "worker_id": worker_id,
    }
    if fields["queue"] is None:
        del fields["queue"]
    if duration is not None:
        fields["duration_ms"] = round(duration * 1000, 3)
    if error is not None:
        fields["error"] = error.split("\n", 1)[0]
    return fields


def log_job(
    logger: logging.Logger,
    level: int,
    job: _Job,
    message: str,
    *args: Any,
    event: str,
    worker_id: str,
    duration: float | None = None,
    error: str | None = None,
) -> None:
    """Log ``job <id> <kind> attempt <n> <message>`` on `logger`, with `job_fields` as extra."""
    if logger.isEnabledFor(level):
        logger.log(
            level,
            "job %d %s attempt %d " + message,
            job.id,
            job.kind,
            job.attempts,
            *args,
            extra=job_fields(event, job, worker_id, duration=duration, error=error),
        )


class JsonFormatter(logging.Formatter):
    """Formats each record as one line of JSON.

    Keys: ``time`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger``,
    ``message``, then the `JOB_FIELDS` present, then any other ``extra=`` field,
    then ``exception`` / ``stack`` when the record has them. Values JSON cannot
    hold are written with ``str()``; a line never holds a raw newline.
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON object on one line."""
        line: dict[str, Any] = {
            "time": _utc(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        extras = vars(record)
        for key in JOB_FIELDS:
            value = extras.get(key)
            if value is not None:
                line[key] = value
        for key, value in extras.items():
            if key not in _STANDARD and key not in line and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str, ensure_ascii=False)


def _utc(created: float) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{seconds}.{int(created % 1 * 1000):03d}Z"


def configure_logging(level: str | int = "INFO", log_format: str = "text") -> logging.Handler:
    """Send the root logger's records to stderr as ``text`` or ``json`` lines.

    What ``sa-jobqueue worker --log-level ... --log-format ...`` does; returns the
    handler it installed (replacing the root logger's handlers). Below DEBUG, the
    libraries of `QUIET_LOGGERS` say only warnings and errors (no line of theirs at start).

    Raises:
        ValueError: `log_format` is neither ``"text"`` nor ``"json"``.
    """
    if log_format not in ("text", "json"):
        raise ValueError(f"log_format must be 'text' or 'json', not {log_format!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    _quiet_libraries(debug=root.level <= logging.DEBUG)
    return handler


def _quiet_libraries(*, debug: bool) -> None:
    """Set `QUIET_LOGGERS` to WARNING (or back, for DEBUG) where the application did not."""
    for name in QUIET_LOGGERS:
        logger = logging.getLogger(name)
        if debug and name in _quieted:
            logger.setLevel(logging.NOTSET)
            _quieted.discard(name)
        elif not debug and logger.level == logging.NOTSET:
            logger.setLevel(logging.WARNING)
            _quieted.add(name)
