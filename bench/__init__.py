"""The benchmarks: one runner (``python -m bench``), scenarios as modules, one targets table.

- ``bench/__main__.py``: the runner. ``python -m bench --list`` names every scenario;
  ``python -m bench SCENARIO [OPTIONS]`` runs one (``--help`` after its name lists its
  options, ``--quick`` its smallest sizes); ``python -m bench`` alone is ``make bench``.
- ``bench/scenarios/``: one module per thing measured, named after it (``drain``,
  ``enqueue``, ``latency``, ...); `bench.scenarios.SCENARIOS` lists them in the order
  ``make bench`` runs them.
- ``bench/support/``: what scenarios share: the benchmark's application (``app.py``),
  the raw-SQL limit (``raw.py``), worker processes (``drive.py``, ``workers.py``),
  databases, timing, callgrind and results files.
- ``bench/targets.py``: every target a scenario checks, one row each and one column per
  database, held or not.
- ``bench/*-results.md``: the results scenarios wrote, kept as records.

A scenario takes the database it measures as a parameter (`bench.support.database.Database`,
from ``--database-url``, one per database), so a database added to the bench is one more
``--database-url`` and one more column of the targets table, not a copy of a script.
"""
