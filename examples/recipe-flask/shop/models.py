from flask_sqlalchemy import SQLAlchemy
from sa_jobqueue import JobMixin
from sqlalchemy import String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base)


class Signup(Base):
    __tablename__ = "signups"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(320))  # a length: MySQL's VARCHAR needs one
    welcomed: Mapped[bool] = mapped_column(default=False)


class Task(Base):
    __tablename__ = "tasks"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)  # str(job.id)
    name: Mapped[str] = mapped_column(String(128))
    complete: Mapped[bool] = mapped_column(default=False)

    def progress(self) -> float:
        """The job's last `ctx.progress`, from 0 to 1 (its job pruned: 1 if complete)."""
        job = db.session.get(Job, int(self.id))
        if job is not None and isinstance(job.progress, int | float):
            return float(job.progress)
        return 1.0 if self.complete else 0.0


class Job(JobMixin, Base):
    __tablename__ = "jobs"
