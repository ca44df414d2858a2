from flask import current_app
from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.flask import JobQueueExtension

from shop.models import Job, Signup, Task, db

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


@jobs.task("export_signups", queue="exports", max_attempts=1)
def export_signups(ctx: JobContext) -> dict[str, list[str]]:
    signups = db.session.scalars(db.select(Signup).order_by(Signup.id)).all()
    emails: list[str] = []
    for done, signup in enumerate(signups, start=1):
        emails.append(signup.email)  # microblog writes each post into the file it mails
        ctx.progress(done / len(signups))  # 0 to 1, into the job's `progress` column
    task = db.session.get_one(Task, str(ctx.id))
    task.complete = True
    db.session.commit()
    print(f"exported {len(emails)} signups", flush=True)
    return {"emails": emails}  # the job's `result`
