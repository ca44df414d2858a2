import logging
import os

from sa_jobqueue import JobContext, JobMixin, JobQueue
from sqlalchemy import create_engine
from sqlalchemy.orm import DeclarativeBase, Session

# Through PgBouncer: each transaction may run on another server connection, so no
# server-side prepared statements (psycopg prepares after five runs of a query).
engine = create_engine(os.environ["DATABASE_URL"], connect_args={"prepare_threshold": None})


class Base(DeclarativeBase):
    pass


class Job(JobMixin, Base):
    __tablename__ = "jobs"


jobs = JobQueue(Job)
log = logging.getLogger("pooled")


@jobs.task("ping")
def ping(ctx: JobContext) -> None:
    log.info("ping %s handled", ctx.payload["n"])


if __name__ == "__main__":
    for n in range(10):  # more than five runs of the same INSERT, on pooled connections
        with Session(engine) as session, session.begin():
            jobs.enqueue(session, "ping", {"n": n})
    print("enqueued 10 pings")
