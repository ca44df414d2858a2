"""``python -m bench``: the benchmarks' one runner (``make bench`` and its ``bench-*`` targets).

Usage::

    python -m bench --list                       # every scenario, what it measures
    python -m bench [--quick]                    # make bench: the suite, then the targets
    python -m bench SCENARIO [SCENARIO ...] [--quick] [OPTIONS]
    python -m bench SCENARIO --help              # a scenario's own options
    python -m bench targets [--reset]            # the targets table of the last run
    python -m bench [--only A,B] [SCENARIO ...] --python 3.13   # each scenario in 3.13 too

Run it from the checkout's root. The database is ``--database-url`` (once per database:
each is one column of the targets table), else ``DATABASE_URL``, else a throwaway
PostgreSQL started for the run (`sa_jobqueue.testing.throwaway_postgres`); scenarios
measure in scratch databases they drop afterwards. ``--quick`` gives each scenario its
smallest sizes (its ``QUICK`` options; options typed after it win) and writes the reports
under ``bench/out/``, never over the ``bench/*-results.md`` records. OPTIONS go to every
scenario named, so name one scenario to pass it options of its own.

``--python 3.13`` (repeatable) runs each scenario a second time in ``.venv-3.13``
(`bench.support.pythons`), right after or before this interpreter's run of it (the order
alternates from one scenario to the next), and the targets table gets a column per
database and Python. ``--only A,B`` runs those scenarios of ``make bench``'s suite, with
its options, and prints the targets table as the suite does.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import time
from types import ModuleType

from bench import targets
from bench.scenarios import SCENARIOS
from bench.support import pythons, results
from bench.support.database import Database
from bench.support.timing import log


def scenario(name: str) -> ModuleType:
    """The module of scenario `name` (``bench/scenarios/NAME.py``)."""
    if name not in SCENARIOS:
        raise SystemExit(f"no scenario {name!r}: python -m bench --list names them")
    return importlib.import_module(f"bench.scenarios.{name}")


def summary(module: ModuleType) -> str:
    return (module.__doc__ or "").strip().splitlines()[0].strip("`").strip()


def list_scenarios() -> None:
    width = max(len(name) for name in SCENARIOS)
    for name, suite in SCENARIOS.items():
        try:
            line = summary(scenario(name))
        except ImportError as error:  # e.g. the dashboard's extra is not installed
            line = f"(cannot import here: {error})"
        mark = "make bench" if suite is not None else "          "
        print(f"{name:<{width}}  {mark}  {line}")


def parser_of(name: str, module: ModuleType) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m bench {name}",
        description=(module.__doc__ or "").strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    module.add_arguments(parser)
    return parser


def second(
    other: pythons.Interpreter, name: str, database: Database, options: list[str], quick: bool
) -> int:
    """Scenario `name` on `database` in `other`; a target it did not reach says why."""
    before = targets.mark()
    status = pythons.run(other, name, database.url, options, quick)
    if status:
        reached = targets.since(before)
        for target, scenario in targets.EXPECTED.items():
            if scenario == name and (target, database.name, other.version) not in reached:
                with targets.measuring(name, database.name):
                    targets.unmeasured(
                        target,
                        f"the scenario failed there (exit {status}; its log above)",
                        python=other.version,
                    )
    return status


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = []
    while argv and not argv[0].startswith("-"):
        names.append(argv.pop(0))
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=(__doc__ or "").strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
        add_help=not names,  # after a scenario's name, --help is the scenario's
    )
    parser.add_argument("--list", action="store_true", help="name every scenario and stop")
    parser.add_argument(
        "--database-url",
        action="append",
        help="a database server to measure (repeat it for each database: one column each)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="each scenario's smallest sizes; reports in bench/out/"
    )
    parser.add_argument(
        "--keep-going", action="store_true", help="run the next scenario after one fails"
    )
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="VERSION",
        help="run each scenario in .venv-VERSION (or an interpreter's path) too: one more "
        "column per database in the targets table (repeatable)",
    )
    if not names:
        # After a scenario's name, --only is the scenario's own (drain_beside, cost...).
        parser.add_argument(
            "--only",
            type=lambda text: [n for n in text.split(",") if n],
            metavar="A,B",
            help="make bench's suite, its options and its targets table, but these scenarios alone",
        )
    args, rest = parser.parse_known_args(argv)
    if args.list:
        list_scenarios()
        return 0
    urls = args.database_url or [u for u in [os.environ.get("DATABASE_URL")] if u]
    others = [pythons.resolve(spec) for spec in args.python]
    versions = [pythons.version(), *(o.version for o in others)]
    if names == ["targets"]:
        targets_parser = argparse.ArgumentParser(prog="python -m bench targets")
        targets.add_arguments(targets_parser)
        targets.main(
            targets_parser.parse_args(rest), [Database.from_url(u).name for u in urls], versions
        )
        return 0
    only = getattr(args, "only", None)
    suite = not names
    if suite:
        if rest:
            parser.error(
                f"{' '.join(rest)}: name the scenarios first (python -m bench SCENARIO... "
                "[OPTIONS]); a scenario's own options go after its name"
            )
        names = [name for name, options in SCENARIOS.items() if options is not None]
        if only:
            unknown = [n for n in only if n not in names]
            if unknown:
                parser.error(f"--only {','.join(unknown)}: not in make bench's suite (--list)")
            names = [n for n in names if n in only]
    modules = {name: scenario(name) for name in names}
    parsed = {}
    own = {}  # a scenario's options without QUICK's: a second Python's runner adds those
    for name, module in modules.items():
        own[name] = [*(SCENARIOS[name] or [] if suite else []), *rest]
        options = [*(module.QUICK if args.quick else []), *own[name]]
        parsed[name] = parser_of(name, module).parse_args(options)
    results.smoke = args.quick  # a smoke run writes under bench/out/, never over a record
    began = time.monotonic()
    failed = []
    with contextlib.ExitStack() as stack:
        if not urls and any(getattr(m, "SERVER", True) for m in modules.values()):
            from sa_jobqueue.testing import throwaway_postgres

            log("no --database-url or DATABASE_URL: starting a throwaway PostgreSQL")
            urls = [stack.enter_context(throwaway_postgres())]
        databases = [Database.from_url(url) for url in urls]
        if suite:
            targets.reset()
        for index, (name, module) in enumerate(modules.items()):
            supported = getattr(module, "DATABASES", ("postgresql",))
            own_server = not getattr(module, "SERVER", True)
            for database in [Database("postgresql", "")] if own_server else databases:
                if database.name not in supported:
                    log(f"{name}: not measured on {database.name} (runs on {', '.join(supported)})")
                    continue
                # Each interpreter goes first as often as the others: the load drifts.
                runs: list[pythons.Interpreter | None] = [None, *others]
                runs = runs[index % len(runs) :] + runs[: index % len(runs)]
                for other in runs:
                    version = other.version if other else pythons.version()
                    where = f"{name} on {database.name}, Python {version}"
                    log(where)
                    if others:  # whose report follows, where two interpreters' interleave
                        print(f"\n<!-- {where} -->", flush=True)
                    try:
                        if other is None:
                            with targets.measuring(name, database.name):
                                status = module.main(parsed[name], database) or 0
                        else:
                            status = second(other, name, database, own[name], args.quick)
                    except Exception as error:  # with --keep-going, the next scenario runs
                        if not args.keep_going:
                            raise
                        log(f"{where} failed: {error!r}")
                        status = 1
                    if status:
                        failed.append(where)
                        if not args.keep_going:
                            return status
        if suite or others:
            print("\n## Targets, this run (bench/targets.py)\n")
            print(targets.table(targets.read(), [d.name for d in databases], versions))
    log(f"{', '.join(names)}: {(time.monotonic() - began) / 60:.1f} min")
    if failed:
        log(f"failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
