"""The scenarios, one module each, named after what they measure (docs/performance.md).

Each module has a docstring whose first line says what it measures, and:

- ``add_arguments(parser)``: its own options (sizes, repetitions, cases);
- ``main(args, database) -> int | None``: the measurement, on `database`
  (`bench.support.database.Database`: a server to make scratch databases on); a
  non-zero return is the runner's exit status;
- ``QUICK``: the options of its quickest run (``python -m bench SCENARIO --quick``);
- optionally ``DATABASES`` (the dialects it runs on; default PostgreSQL alone) and
  ``SERVER = False`` when it starts a PostgreSQL of its own (``hosts``, ``chaos``).
"""

from __future__ import annotations

#: Every scenario, in the order ``make bench`` runs them, with the options it passes;
#: None: not part of ``make bench`` (a target of its own, or run by hand).
SCENARIOS: dict[str, list[str] | None] = {
    "drain": [],
    "async_handlers": [],
    "limits": [],
    "fairness": [],
    "backlog": [],
    "next_due": [],
    "latency": ["--wake-only", "--samples", "200"],
    "drain_limit": [],
    "workflows": [],
    "steps": [],
    "peers": [],
    "enqueue": [],
    "databases": [],
    "startup": [],
    "hosts": ["--skip-unless-permitted"],
    "cost": ["--floors"],
    "features": [],
    "drain_beside": [],
    "commit": None,
    "registry": None,
    "dashboard": None,
    "counters": None,
    "counters_fold": None,
    "gauges": None,
    "durable_gauges": None,
    "chaos": None,
    "schedules": None,
    "sql_enqueue": None,
    "memory": None,
    "archive": None,
    "drain_rounds": None,
    "claim_plan": None,
    "soak": None,
}
