import logging
import time

from sa_jobqueue import JobContext, JobMixin, JobQueue
from sqlalchemy.orm import DeclarativeBase


class Base(DeclarativeBase):
    pass


class Job(JobMixin, Base):
    __tablename__ = "jobs"


jobs = JobQueue(Job)
log = logging.getLogger("reports")


@jobs.task("build_report")
def build_report(ctx: JobContext) -> None:
    log.info("report %s started", ctx.payload["report"])
    time.sleep(2)  # stands for real work; a shutdown lets it finish
    log.info("report %s finished", ctx.payload["report"])
