from flask import current_app
from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.flask import JobQueueExtension

from shop.models import Job, Signup, db

jobs = JobQueue(Job)
flask_jobs = JobQueueExtension(jobs)


@jobs.task("send_welcome", queue="mail", max_attempts=5)
def send_welcome(ctx: JobContext) -> dict[str, str]:
    signup = db.session.get_one(Signup, ctx.payload["signup_id"])
    sender = current_app.config["MAIL_SENDER"]
    print(f"welcome mail from {sender} sent to {signup.email}", flush=True)
    signup.welcomed = True
    db.session.commit()
    return {"welcomed": signup.email}  # stored in the job's `result` column


# Each inserted signup enqueues its welcome, in the flush that writes the row.
jobs.enqueue_on(Signup, "insert", "send_welcome", payload=lambda signup: {"signup_id": signup.id})
