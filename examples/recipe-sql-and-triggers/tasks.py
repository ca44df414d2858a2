import os

from sa_jobqueue import JobContext, JobMixin, JobQueue
from sqlalchemy import create_engine
from sqlalchemy.orm import DeclarativeBase


class Base(DeclarativeBase):
    pass


class Job(JobMixin, Base):
    __tablename__ = "jobs"


jobs = JobQueue(Job)
jobs.bind(create_engine(os.environ["DATABASE_URL"]))


@jobs.task("send_receipt", max_attempts=3)
def send_receipt(ctx: JobContext) -> None:
    print(f"receipt for order {ctx.payload['order_id']}", flush=True)
