import logging

from sa_jobqueue import JobContext, JobQueue

from models import Job

jobs = JobQueue(Job)
log = logging.getLogger("users")


@jobs.task("send_new_account_email", queue="mail")
def send_new_account_email(ctx: JobContext) -> dict[str, str]:
    # Lease mode: at-least-once, so hand ctx.idempotency_key to the mail provider.
    email = ctx.payload["email"]
    log.info("new account mail to %s sent (key %s)", email, ctx.idempotency_key)
    return {"sent_to": email}
