"""DBOS's and Celery's side of the ``steps`` scenario; runs in their own virtualenv.

Usage: ``python bench/support/steps_peer_drive.py ACTION ...``, ACTION one of:

- ``dbos URL N C``: N three-step workflows enqueued on a DBOS queue through `DBOSClient`
  (not timed), then DBOS launched with that queue at ``worker_concurrency=C`` and its
  defaults otherwise (its 1 s queue poll); print ``{"rate": ..., "done": N}``, timed from
  the first step's start to the last workflow's end; URL: DBOS's own database;
- ``dbos-recover URL MARKS first|again``: DBOS launched with the queue; ``first`` enqueues
  workflow ``recover-1`` (step one, step two hanging until killed while the MARKS file
  has one ``two`` line, step three); ``again`` only launches (DBOS recovers its pending
  workflows at launch); runs until killed;
- ``celery REDIS N C``: N chains of three tasks sent to a queue of its own on Redis (not
  timed), then a Celery worker (``celery worker -c C``, prefork, its defaults otherwise)
  started in a child process; timed from the first task's start to the N-th chain's end
  (wall clock kept in Redis); the worker is stopped (SIGTERM) and the queue purged after;
- ``celery-worker REDIS C``: that worker (the child).

Imports nothing of sa_jobqueue: its virtualenv has none.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

DONE = threading.Condition()
SPAN = [float("inf"), 0.0]
COUNT = [0]
QUEUE = "steps42_bench"
KEY = "steps42_bench:"


def _wait_for(count: int, timeout: float = 900.0) -> None:
    deadline = time.monotonic() + timeout
    with DONE:
        while COUNT[0] < count:
            if not DONE.wait(max(0.0, deadline - time.monotonic())):
                raise RuntimeError(f"{COUNT[0]} of {count} workflows ended within {timeout}s")


def _mark(path: str, what: str) -> int:
    with open(path, "a") as out:
        out.write(f"{what} {time.time()}\n")
    with open(path) as marks:
        return sum(1 for line in marks if line.startswith(f"{what} "))


def dbos(url: str, action: str, count: int, concurrency: int, marks: str = "") -> dict[str, Any]:
    from dbos import DBOS, DBOSClient

    options: Any = {"queue_name": "bench", "workflow_name": "three"}
    if action == "dbos-recover":
        options = {"queue_name": "bench", "workflow_name": "recover", "workflow_id": "recover-1"}

    @DBOS.step()
    def nothing(n: int) -> int:
        return n

    @DBOS.workflow(name="three")
    def three() -> None:
        started = time.time()
        for n in range(3):
            nothing(n)
        ended = time.time()
        with DONE:
            SPAN[0] = min(SPAN[0], started)
            SPAN[1] = max(SPAN[1], ended)
            COUNT[0] += 1
            DONE.notify_all()

    @DBOS.step()
    def one() -> None:
        _mark(marks, "one")

    @DBOS.step()
    def two() -> None:
        if _mark(marks, "two") == 1:
            time.sleep(3600)  # killed here

    @DBOS.step()
    def three_of_recover() -> None:
        _mark(marks, "three")

    @DBOS.workflow(name="recover")
    def recover() -> None:
        one()
        two()
        three_of_recover()

    DBOS(config={"name": "bench", "system_database_url": url})
    DBOS.launch()  # makes DBOS's tables; nothing runs before the queue is registered
    if action == "dbos" or (marks and sys.argv[4] == "first"):
        client = DBOSClient(system_database_url=url)
        for _ in range(count):
            client.enqueue(options)
        client.destroy()
    DBOS.register_queue("bench", worker_concurrency=concurrency)
    try:
        if action == "dbos-recover":
            time.sleep(3600)  # killed, or ended by the scenario
            return {}
        _wait_for(count)
        return {"rate": count / (SPAN[1] - SPAN[0]), "done": COUNT[0]}
    finally:
        DBOS.destroy(destroy_registry=True)


def _celery_app(broker: str) -> tuple[Any, Any, tuple[Any, ...]]:
    import redis
    from celery import Celery

    app = Celery("steps_bench", broker=broker)
    app.conf.task_default_queue = QUEUE
    app.conf.worker_hijack_root_logger = False
    store = redis.Redis.from_url(broker)

    @app.task(name="steps42.one")
    def one(n: int) -> int:
        store.setnx(KEY + "start", repr(time.time()))
        return n

    @app.task(name="steps42.two")
    def two(n: int) -> int:
        return n

    @app.task(name="steps42.three")
    def three(n: int) -> int:
        pipe = store.pipeline()
        pipe.set(KEY + "end", repr(time.time()))
        pipe.incr(KEY + "done")
        pipe.execute()
        return n

    return app, store, (one, two, three)


def celery(broker: str, count: int, concurrency: int) -> dict[str, Any]:
    from celery import chain

    app, store, (one, two, three) = _celery_app(broker)
    store.delete(KEY + "start", KEY + "end", KEY + "done")
    app.control.purge()
    for n in range(count):
        chain(one.s(n), two.s(), three.s()).apply_async()
    worker = subprocess.Popen(
        [sys.executable, __file__, "celery-worker", broker, str(concurrency)],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 900
        while int(store.get(KEY + "done") or 0) < count:
            if time.monotonic() > deadline or worker.poll() is not None:
                raise RuntimeError(f"celery: {store.get(KEY + 'done')} of {count} chains ended")
            time.sleep(0.01)
        seconds = float(store.get(KEY + "end")) - float(store.get(KEY + "start"))
        return {"rate": count / seconds, "done": int(store.get(KEY + "done"))}
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(60)
        store.delete(KEY + "start", KEY + "end", KEY + "done")


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    action = sys.argv[1]
    if action == "celery-worker":
        app, _, _ = _celery_app(sys.argv[2])
        app.worker_main(["worker", "-c", sys.argv[3], "-Q", QUEUE, "--loglevel", "WARNING"])
        return
    if action == "celery":
        result = celery(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif action == "dbos":
        result = dbos(sys.argv[2], action, int(sys.argv[3]), int(sys.argv[4]))
    elif action == "dbos-recover":
        result = dbos(sys.argv[2], action, 1, 1, marks=sys.argv[3])
    else:
        raise SystemExit(f"unknown action {action!r}")
    print(json.dumps(result), flush=True)
    os._exit(0)  # DBOS's and Celery's threads: nothing left to wait for


if __name__ == "__main__":
    main()
