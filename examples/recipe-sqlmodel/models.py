import os

from sa_jobqueue import JobMixin
from sqlalchemy.orm import DeclarativeBase
from sqlmodel import Field, SQLModel, create_engine

engine = create_engine(os.environ["DATABASE_URL"])


class Hero(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str
    greeted: bool = False


class JobBase(DeclarativeBase):
    # The same MetaData as the SQLModel tables: one schema for create_all and Alembic.
    metadata = SQLModel.metadata


class Job(JobMixin, JobBase):
    __tablename__ = "jobs"
