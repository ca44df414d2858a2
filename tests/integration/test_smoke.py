from sqlalchemy import select
from tests.models import Job, new_queue


def test_enqueue_roundtrip(session):
    jobs = new_queue()
    job = jobs.enqueue(session, "send_receipt", {"order_id": 1}, idempotency_key="k1")
    again = jobs.enqueue(session, "send_receipt", {"order_id": 2}, idempotency_key="k1")
    assert again.id == job.id and again.payload == {"order_id": 1}
    many = jobs.enqueue_many(session, [("a", {"i": 1}), {"kind": "b", "idempotency_key": "k1"}, ("c", [1])])
    assert [j.kind for j in many] == ["a", "send_receipt", "c"]
    session.add(Job(kind="plain"))
    session.flush()
    assert session.scalar(select(Job).where(Job.kind == "plain")).status == "pending"
