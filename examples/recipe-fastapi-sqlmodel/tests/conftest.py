from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sa_jobqueue import JobQueue
from sqlalchemy import Engine, Table
from sqlalchemy.orm import Session as SQLAlchemySession
from sqlmodel import Session, SQLModel

from app import app, get_db, unit_of_work
from models import Job
from tasks import jobs


@pytest.fixture(scope="session")
def jobqueue_tables() -> list[Table]:
    return [SQLModel.metadata.tables["user"]]  # created beside the plugin's migrated jobs table


@pytest.fixture
def jobqueue() -> JobQueue[Job]:
    return jobs


@pytest.fixture
def session(jobqueue_session: SQLAlchemySession) -> Iterator[Session]:
    # A SQLModel Session on the plugin's connection, inside the transaction the plugin
    # rolls back after the test: commits in the app only release savepoints.
    connection = jobqueue_session.connection()
    with Session(bind=connection, join_transaction_mode="create_savepoint") as session:
        yield session


@pytest.fixture
def client(session: Session) -> Iterator[TestClient]:
    app.dependency_overrides[get_db] = lambda: session
    with TestClient(app) as client:
        yield client
    app.dependency_overrides.clear()


@pytest.fixture
def committed_client(jobqueue_committed: Engine) -> Iterator[TestClient]:
    def committed_db() -> Iterator[Session]:
        with unit_of_work(jobqueue_committed) as session:
            yield session

    app.dependency_overrides[get_db] = committed_db
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client
    app.dependency_overrides.clear()
