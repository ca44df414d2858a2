import os

from sa_jobqueue import JobMixin
from sqlalchemy.orm import DeclarativeBase
from sqlmodel import Field, SQLModel, create_engine

engine = create_engine(os.environ["DATABASE_URL"])


class UserCreate(SQLModel):
    email: str
    full_name: str


class User(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    email: str = Field(unique=True, index=True)
    full_name: str


class UserPublic(SQLModel):
    id: int
    email: str
    full_name: str


class JobBase(DeclarativeBase):
    metadata = SQLModel.metadata  # one MetaData for create_all and Alembic


class Job(JobMixin, JobBase):
    __tablename__ = "jobs"
