from typing import NoReturn

import pytest
from fastapi.testclient import TestClient
from sa_jobqueue import JobQueue
from sa_jobqueue.testing import assert_enqueued, perform, refute_enqueued
from sqlalchemy import Engine
from sqlmodel import Session, select

import tasks
from models import Job, User

ADA = {"email": "ada@example.com", "full_name": "Ada"}


def test_signing_up_enqueues_the_new_account_mail(client: TestClient, session: Session) -> None:
    response = client.post("/users/", json=ADA)
    assert response.status_code == 201
    user = session.exec(select(User).where(User.email == "ada@example.com")).one()
    assert_enqueued(
        session,
        "send_new_account_email",
        payload={"user_id": user.id, "email": "ada@example.com"},
        queue="mail",
    )


def test_an_email_already_taken_enqueues_no_second_mail(
    client: TestClient, session: Session
) -> None:
    assert client.post("/users/", json=ADA).status_code == 201
    assert client.post("/users/", json=ADA).status_code == 400
    assert_enqueued(session, "send_new_account_email", count=1)


def test_the_user_and_its_job_commit_together(
    committed_client: TestClient, jobqueue_committed: Engine
) -> None:
    assert committed_client.post("/users/", json=ADA).status_code == 201
    with Session(jobqueue_committed) as other:  # another connection: what was committed
        assert other.exec(select(User.email)).all() == ["ada@example.com"]
    assert_enqueued(jobqueue_committed, "send_new_account_email", count=1)


def test_when_the_enqueue_fails_the_user_is_rolled_back_too(
    committed_client: TestClient, jobqueue_committed: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unavailable(*args: object, **kwargs: object) -> NoReturn:
        raise RuntimeError("the queue is unavailable")

    monkeypatch.setattr(tasks.jobs, "enqueue", unavailable)
    assert committed_client.post("/users/", json=ADA).status_code == 500
    with Session(jobqueue_committed) as other:
        # crud.create_user called session.commit(), and still nothing was committed.
        assert other.exec(select(User)).all() == []
    refute_enqueued(jobqueue_committed)


def test_the_mail_goes_to_the_new_user(jobqueue: JobQueue[Job]) -> None:
    sent = perform(jobqueue, "send_new_account_email", {"user_id": 1, "email": "ada@example.com"})
    assert sent == {"sent_to": "ada@example.com"}
