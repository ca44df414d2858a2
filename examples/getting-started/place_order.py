import sys

from sqlalchemy.orm import Session

from models import Order, engine
from tasks import jobs

order_id = int(sys.argv[1])

with Session(engine) as session, session.begin():
    session.add(Order(id=order_id, customer="dave", total_cents=2500))
    jobs.enqueue(
        session,
        "send_receipt",
        {"order_id": order_id},
        idempotency_key=f"order:{order_id}:receipt",
    )
    jobs.enqueue(session, "create_invoice", {"order_id": order_id})

print(f"order {order_id} placed with its receipt and invoice jobs")
