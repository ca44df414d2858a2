import logging

from sa_jobqueue import JobContext, JobQueue

from models import Invoice, Job, Order

jobs = JobQueue(Job)
log = logging.getLogger("shop")


@jobs.task("send_receipt", queue="mail", max_attempts=5)
def send_receipt(ctx: JobContext) -> None:
    # Lease mode (the default) is at-least-once: the job may run twice, so hand
    # ctx.idempotency_key to the mail provider and let it drop the duplicate.
    log.info("receipt for order %s sent (key %s)", ctx.payload["order_id"], ctx.idempotency_key)


@jobs.task("create_invoice", transactional=True)
def create_invoice(ctx: JobContext) -> None:
    # Transactional mode: these writes commit together with the job's "done" mark,
    # or not at all. Exactly once, for work in this database.
    order = ctx.session.get_one(Order, ctx.payload["order_id"])
    ctx.session.add(Invoice(order_id=order.id, total_cents=order.total_cents))
    log.info("invoice for order %s created", order.id)
