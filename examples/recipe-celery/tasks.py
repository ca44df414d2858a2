import logging
import os
from datetime import datetime, timedelta, timezone

from sa_jobqueue import JobContext, JobMixin, JobQueue, Retry
from sqlalchemy import create_engine
from sqlalchemy.orm import DeclarativeBase, Session


class Base(DeclarativeBase):
    pass


class Job(JobMixin, Base):
    __tablename__ = "jobs"


engine = create_engine(os.environ["DATABASE_URL"])
jobs = JobQueue(Job)
log = logging.getLogger("mail")


@jobs.task("send_welcome", queue="mail", max_attempts=4)
def send_welcome(ctx: JobContext) -> None:
    if ctx.attempt == 1:
        # Celery's self.retry(countdown=...): run again later, not a failure.
        raise Retry(delay=timedelta(seconds=1), reason="rate limited")
    log.info("welcome mail to user %s, attempt %s", ctx.payload["user_id"], ctx.attempt)


@jobs.task("send_digest", queue="mail")
def send_digest(ctx: JobContext) -> None:
    log.info("digest sent (tick %s)", ctx.idempotency_key)


# beat_schedule = {"digest": {"task": "send_digest", "schedule": 1.0}}
jobs.periodic("send_digest", every=timedelta(seconds=1))


def signup(user_id: int) -> None:
    with Session(engine) as session, session.begin():
        # session.add(User(id=user_id, ...)) goes here: the job commits with it.
        jobs.enqueue(session, "send_welcome", {"user_id": user_id})  # .delay(...)
        jobs.enqueue(session, "send_welcome", {"user_id": user_id + 1}, delay=1)  # countdown
        later = datetime.now(timezone.utc) + timedelta(seconds=2)
        jobs.enqueue(session, "send_welcome", {"user_id": user_id + 2}, run_at=later)  # eta


if __name__ == "__main__":
    signup(42)
    print("enqueued 3 jobs")
