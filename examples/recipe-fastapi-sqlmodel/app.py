from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException
from sqlalchemy import Engine
from sqlmodel import Session

import crud
from models import UserCreate, UserPublic, engine
from tasks import jobs


@contextmanager
def unit_of_work(bind: Engine) -> Iterator[Session]:
    """A session in one transaction: it commits at the end, or rolls back on an error.

    The session is joined to the connection's transaction, so session.commit() in a CRUD
    helper only releases a SAVEPOINT: what the helper wrote, and the jobs enqueued after
    it, commit together when the block ends.
    """
    with (
        bind.begin() as connection,
        Session(bind=connection, join_transaction_mode="create_savepoint") as session,
    ):
        yield session
        # What came after the helpers' last commit (the job) is in a savepoint still:
        # release it, or closing the session would roll it back.
        session.commit()


def get_db() -> Iterator[Session]:
    with unit_of_work(engine) as session:
        yield session


# scope="function": the transaction ends when the route returns, before the response is
# sent, so a 201 means committed (FastAPI 0.121 and later).
SessionDep = Annotated[Session, Depends(get_db, scope="function")]
app = FastAPI()


@app.post("/users/", status_code=201)
def create_user(user_in: UserCreate, session: SessionDep) -> UserPublic:
    if crud.get_user_by_email(session=session, email=user_in.email):
        raise HTTPException(400, "The user with this email already exists in the system.")
    user = crud.create_user(session=session, user_create=user_in)  # commits: a savepoint here
    jobs.enqueue(session, "send_new_account_email", {"user_id": user.id, "email": user.email})
    return UserPublic.model_validate(user)
