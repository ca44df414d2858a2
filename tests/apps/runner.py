"""Run a worker with test-sized timings (the CLI has no flag for the sweep interval).

``python -m tests.apps.runner tests.apps.lesson:jobs [--concurrency N]
[--sweep-interval S] [--poll-interval P] [--shutdown-timeout T]``; ``DATABASE_URL``
names the database. Logs like ``sa-jobqueue worker`` does.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from sqlalchemy import create_engine

from sa_jobqueue.cli import load_jobqueue


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("target")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--sweep-interval", type=float, default=0.5)
    parser.add_argument("--poll-interval", type=float, default=0.5)
    parser.add_argument("--shutdown-timeout", type=float, default=10.0)
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    jobs = load_jobqueue(args.target)
    engine = create_engine(os.environ["DATABASE_URL"], pool_size=args.concurrency + 3)
    jobs.worker(
        engine,
        concurrency=args.concurrency,
        sweep_interval=args.sweep_interval,
        poll_interval=args.poll_interval,
        shutdown_timeout=args.shutdown_timeout,
    ).run()
    logging.shutdown()
    os._exit(0)  # handler threads past the shutdown timeout must not hold the process


if __name__ == "__main__":
    main()
