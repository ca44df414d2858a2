import logging
import os
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, FastAPI
from sa_jobqueue import JobContext, JobMixin, JobQueue
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# psycopg 3 is async too: the same DATABASE_URL serves the app and the worker.
engine = create_async_engine(os.environ["DATABASE_URL"])
sessions = async_sessionmaker(engine, expire_on_commit=False)
log = logging.getLogger("shop")


class Base(DeclarativeBase):
    pass


class Signup(Base):
    __tablename__ = "signups"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str]


class Job(JobMixin, Base):
    __tablename__ = "jobs"


jobs = JobQueue(Job)
app = FastAPI()


async def session() -> AsyncIterator[AsyncSession]:
    async with sessions() as db:
        yield db


@app.post("/signups/{email}", status_code=201)
async def sign_up(email: str, db: Annotated[AsyncSession, Depends(session)]) -> dict[str, int]:
    async with db.begin():  # the signup and its job commit together
        signup = Signup(email=email)
        db.add(signup)
        await db.flush()
        await jobs.aenqueue(db, "send_welcome", {"signup_id": signup.id})
    return {"id": signup.id}


@jobs.task("send_welcome", queue="mail")
async def send_welcome(ctx: JobContext) -> None:
    # Awaited on the worker's event loop: await your async mail client here.
    log.info("welcome mail for signup %s sent", ctx.payload["signup_id"])
