# sa-jobqueue developer commands. `make help` lists them.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# pytest-xdist processes of `make pytest` and `make quick` (0: one process). The suite
# waits on worker processes, servers and a browser far more than it computes: two
# processes on two cores take it from about 40 minutes to about 18.
PYTEST_WORKERS ?= 2
export PYTEST_WORKERS

.DEFAULT_GOAL := help
.PHONY: help install system-packages mariadb package pythons floors dbapis test quick lint typecheck pytest docs docs-serve check demo demo-dashboard bench bench-latency bench-limits bench-fairness bench-startup bench-commit bench-enqueue bench-peers bench-hosts bench-backlog bench-cost bench-features bench-workflows chaos clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 12

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,docs]'
	touch $(STAMP)

install: $(STAMP)  ## create .venv and install the project with its test and docs extras

system-packages:  ## install PgBouncer and Chromium (Debian packages) when missing: the suite drives both
	bash .ci/system-packages

mariadb:  ## start MariaDB on 127.0.0.1:3306 when it is down (installing mariadb-server when missing) and wait until it answers
	bash .ci/mariadb

lint: $(STAMP)  ## ruff check, format check, and the import layers (import-linter)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)  ## mypy (strict) over the package and the tests, then over each examples/ app
	$(BIN)/mypy
	bash .ci/typecheck-examples

pytest: $(STAMP) system-packages mariadb  ## the test suite only
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal

quick: $(STAMP) mariadb  ## the fast tiers: ruff, then tests/unit and tests/integration (no worker processes)
	$(BIN)/ruff check .
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist worksteal tests/unit tests/integration tests/migration sa_jobqueue

docs: $(STAMP)  ## build the docs site into site/ in strict mode (a broken link fails)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: $(STAMP)  ## serve the docs site on http://127.0.0.1:8000 while you edit
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

package: $(STAMP)  ## build the sdist and wheel into dist/ and check them (twine, the shipped migrations inside)
	rm -rf dist
	$(BIN)/python -m build --outdir dist . >/dev/null
	$(BIN)/twine check --strict dist/*
	$(BIN)/python .ci/check-wheel dist/*.whl

pythons: $(STAMP) mariadb  ## the fast tier (unit tests, doctests) and the async worker's tests on Python 3.13 too, in .venv-3.13
	bash .ci/other-pythons

floors: mariadb  ## the fast tier and the enqueue and migration tests on the lowest SQLAlchemy, Alembic and psycopg pyproject.toml allows, in .venv-floor
	bash .ci/floor-versions

dbapis: $(STAMP) system-packages mariadb  ## every MariaDB test again on mysqlclient (mariadb+mysqldb://), built into .venv
	bash .ci/other-dbapis

check: lint typecheck docs package pythons floors dbapis pytest  ## everything CI runs

test: check  ## ruff, mypy, the strict docs build and pytest: the README's test command

demo: $(STAMP)  ## the lesson end to end with real worker processes
	$(BIN)/python examples/demo.py

demo-dashboard: $(STAMP)  ## the demo, then its jobs in the web dashboard (Ctrl-C ends it)
	$(BIN)/python examples/demo.py --dashboard

bench: $(STAMP)  ## python -m bench: the benchmark suite, then its targets table (python -m bench --list names each scenario; make bench-pythons: 3.13 too)
	$(BIN)/pip install --quiet -e '.[test,bench]'
	$(BIN)/python -m bench

# The second interpreter of bench-pythons: pyenv's newest BENCH_PYTHON.*, else pythonX.Y.
BENCH_PYTHON ?= 3.13
BENCH_ARGS ?=

.PHONY: bench-pythons
bench-pythons: $(STAMP)  ## the suite on .venv's Python and in .venv-3.13, interleaved: a targets column per database and Python (BENCH_ARGS=--only=drain_limit,peers: some scenarios)
	$(BIN)/pip install --quiet -e '.[test,bench]'
	test -x .venv-$(BENCH_PYTHON)/bin/python || "$$( (ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/$(BENCH_PYTHON).*/bin/python 2>/dev/null | sort -V | tail -n 1 | grep .) || command -v python$(BENCH_PYTHON))" -m venv .venv-$(BENCH_PYTHON)
	.venv-$(BENCH_PYTHON)/bin/pip install --quiet -e '.[test,bench]'
	$(BIN)/python -m bench --python $(BENCH_PYTHON) $(BENCH_ARGS)

bench-features: $(STAMP)  ## instructions per plain job beside limits, workflows and durable steps (callgrind)
	$(BIN)/python -m bench features

bench-limits: $(STAMP)  ## what flow control costs claims: bench/limits-results.md
	$(BIN)/python -m bench limits

bench-fairness: $(STAMP)  ## light keys' wait behind a heavy key, with and without fair=True: bench/fairness-results.md
	$(BIN)/python -m bench fairness

bench-latency: $(STAMP)  ## wake-up latency and the enqueue cost of notifications: bench/latency-results.md
	$(BIN)/python -m bench latency

bench-startup: $(STAMP)  ## import time, and `sa-jobqueue worker` exec to its first claim
	$(BIN)/python -m bench startup

bench-commit: $(STAMP)  ## lease drains with synchronous vs asynchronous commit, side by side
	$(BIN)/python -m bench commit

bench-enqueue: $(STAMP)  ## issue-30 enqueue targets: batch vs raw and PGQueuer, one enqueue vs raw execute and PGQueuer
	$(BIN)/python -m bench enqueue

bench-peers: $(STAMP)  ## beside PGQueuer and procrastinate (installed into bench/out/peers-venv-VERSION)
	$(BIN)/python -m bench peers

.PHONY: bench-databases
bench-databases: $(STAMP) mariadb  ## PostgreSQL, SQLite and MariaDB side by side, each beside its raw loop; huey and DBOS on SQLite: bench/databases-results.md
	$(BIN)/python -m bench databases

bench-hosts: $(STAMP)  ## N = 1, 2, 4, 8 worker hosts in network namespaces against one PostgreSQL (root): bench/hosts-results.md
	$(BIN)/python -m bench hosts

bench-workflows: $(STAMP)  ## fan-out/fan-in and chains against a plain drain: bench/workflows-results.md
	$(BIN)/python -m bench workflows

.PHONY: bench-steps
bench-steps: $(STAMP)  ## durable steps beside a raw loop of the same writes, DBOS and Celery; recovery after kill -9: bench/steps-results.md
	$(BIN)/python -m bench steps

bench-backlog: $(STAMP)  ## claims beside 1,000,000 pending rows and over 1,000 queues, and the next-due probe
	$(BIN)/python -m bench backlog next_due

bench-cost: $(STAMP)  ## instructions per job drained and per enqueue (valgrind): bench/cost-history.md
	$(BIN)/python -m bench cost --floors

chaos: $(STAMP)  ## the full chaos run (kills, cut connections, a server restart)
	$(BIN)/python -m bench chaos

clean:  ## remove the virtualenv and caches
	rm -rf $(VENV) .venv-3.* .venv-floor .pytest_cache .mypy_cache .ruff_cache build dist site
