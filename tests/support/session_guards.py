"""A pytest plugin: the test process's own state made independent of what launched it.

Loaded with ``-p`` (pyproject.toml's ``addopts``), so the doctests of ``sa_jobqueue/``
have it too (tests/conftest.py is not theirs).

**Ctrl-C.** A shell without job control starts a background command (``make test &``)
with SIGINT and SIGQUIT ignored, and every process it starts inherits that: a worker,
``stats --watch`` or the demo that a test stops with SIGINT would never stop (two tests
timed out so in a CI check started that way). SIGINT gets Python's own handler back, so
the processes the tests start get the default.

**linecache.** Python 3.11's ``linecache.checkcache()`` lists the cache's keys, then reads
each entry by key; a thread formatting a traceback or a warning meanwhile may drop an
entry of a file that is not on disk (``<sqlalchemy generated __init__ ...>``), and the
read raises ``KeyError``. The doctest runner calls it (``pdb.Pdb.reset``) before each
doctest: CI saw ``sa_jobqueue/worker/limited_claimer.py::KindBackoff`` fail so while a
thread of an earlier test was still writing a log record. A cache entry gone is no
error; the check of the other entries is what is kept.
"""

from __future__ import annotations

import contextlib
import linecache
import signal

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_checkcache = linecache.checkcache


def _checkcache_of_what_is_there(filename: str | None = None) -> None:
    for name in list(linecache.cache) if filename is None else [filename]:
        # Dropped by another thread between the test and the read: nothing to check.
        with contextlib.suppress(KeyError):
            _checkcache(name)


linecache.checkcache = _checkcache_of_what_is_there
