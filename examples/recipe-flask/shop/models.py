from flask_sqlalchemy import SQLAlchemy
from sa_jobqueue import JobMixin
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base)


class Signup(Base):
    __tablename__ = "signups"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str]
    welcomed: Mapped[bool] = mapped_column(default=False)


class Job(JobMixin, Base):
    __tablename__ = "jobs"
