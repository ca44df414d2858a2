"""An image pipeline as a workflow: fetch -> resize x N -> publish, with a batch callback.

Run it::

    python examples/image_pipeline.py

It uses the server in ``DATABASE_URL`` (in a scratch database of its own, dropped
afterwards) or, without it, a throwaway PostgreSQL from this machine. One upload
request inserts, in the same transaction as its ``Upload`` row, the whole graph:

* ``fetch`` downloads the original (here: makes up its size);
* a batch of ``resize`` jobs, one per width, each waiting for ``fetch`` and reading
  its result through ``ctx.upstream``; the batch's callback, ``publish``, runs once
  after every resize has ended, with their results (and statuses) in its context;
* ``notify`` waits for ``publish`` and runs even when it failed
  (``after_failure="run"``), to tell the uploader either way.

A worker then drains the queue, and the script prints what ran, in order.
See docs/workflows.md.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from typing import Any

from sa_jobqueue import JobContext, JobMixin, JobQueue, migration
from sa_jobqueue.testing import scratch_database, throwaway_postgres
from sqlalchemy import Integer, Text, create_engine, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

WIDTHS = (160, 320, 640, 1280)


class Base(DeclarativeBase):
    pass


class Upload(Base):
    __tablename__ = "uploads"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    url: Mapped[str] = mapped_column(Text)
    published: Mapped[str | None] = mapped_column(Text)


class Job(JobMixin, Base):
    __tablename__ = "jobs"


jobs = JobQueue(Job)
log: list[str] = []


@jobs.task("fetch")
def fetch(ctx: JobContext) -> dict[str, Any]:
    log.append(f"fetch {ctx.payload['url']}")
    return {"url": ctx.payload["url"], "bytes": 4_000_000}


@jobs.task("resize")
def resize(ctx: JobContext) -> dict[str, Any]:
    (original,) = ctx.upstream.values()  # the fetch job's result
    width = ctx.payload["width"]
    log.append(f"resize {width}")
    return {"width": width, "bytes": original["bytes"] * width // 4000}


@jobs.task("publish", transactional=True)
def publish(ctx: JobContext) -> str:
    # The batch callback: every resize has ended; their results are in ctx.upstream.
    outcomes = Counter(ctx.upstream_statuses.values())
    widths = sorted(r["width"] for r in ctx.upstream.values() if r is not None)
    upload = ctx.session.get_one(Upload, ctx.payload["upload_id"])
    upload.published = ",".join(map(str, widths))  # commits with this job's done mark
    log.append(f"publish {widths} ({dict(outcomes)})")
    return upload.published


@jobs.task("notify")
def notify(ctx: JobContext) -> None:
    ((publish_id, status),) = ctx.upstream_statuses.items()
    log.append(f"notify: publish job {publish_id} ended {status}")


def upload(session: Session, upload_id: int, url: str) -> int:
    """What an upload request does: its row and its whole pipeline, in one transaction."""
    session.add(Upload(id=upload_id, url=url))
    fetched = jobs.enqueue(session, "fetch", {"url": url})
    batch = jobs.batch(session, callback=("publish", {"upload_id": upload_id}))
    batch.enqueue_many(
        [{"kind": "resize", "payload": {"width": w}, "after": [fetched]} for w in WIDTHS]
    )
    jobs.enqueue(session, "notify", {}, after=[batch.id], after_failure="run")
    return batch.id


def main(url: str) -> list[str]:
    """Migrate, upload one image, drain the queue; return what ran, in order."""
    log.clear()
    engine = create_engine(url, pool_size=4 + 4)  # the worker's concurrency + 4
    try:
        migration.upgrade(url)
        Base.metadata.create_all(engine, tables=[Base.metadata.tables["uploads"]])
        with Session(engine) as session, session.begin():
            upload(session, 1, "https://example.com/cat.jpg")
        jobs.worker(engine, concurrency=4, listen=False).drain()
        with Session(engine) as session:
            published = session.scalar(select(Upload.published).where(Upload.id == 1))
        log.append(f"upload 1 published: {published}")
        return list(log)
    finally:
        engine.dispose()


if __name__ == "__main__":
    with contextlib.ExitStack() as stack:
        server = os.environ.get("DATABASE_URL") or stack.enter_context(throwaway_postgres())
        database = stack.enter_context(scratch_database(server, prefix="image_pipeline"))
        for line in main(database):
            print(line)
