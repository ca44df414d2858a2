import os

from flask import Flask
from flask_sqlalchemy import SQLAlchemy
from sa_jobqueue import JobContext, JobMixin, JobQueue
from sa_jobqueue.middleware import CallNext
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base)
app = Flask(__name__)
app.config["SQLALCHEMY_DATABASE_URI"] = os.environ["DATABASE_URL"]
db.init_app(app)


# Subclass Base: db.Model shares its metadata, and type checkers see the class.
class Signup(Base):
    __tablename__ = "signups"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str]
    welcomed: Mapped[bool] = mapped_column(default=False)


class Job(JobMixin, Base):
    __tablename__ = "jobs"


jobs = JobQueue(Job)


@app.post("/signups/<email>")
def sign_up(email: str) -> tuple[dict[str, int], int]:
    signup = Signup(email=email)
    db.session.add(signup)
    db.session.flush()  # assigns signup.id
    jobs.enqueue(db.session, "send_welcome", {"signup_id": signup.id})
    db.session.commit()  # the signup and its job, together
    return {"id": signup.id}, 201


@jobs.middleware
def app_context(ctx: JobContext, call_next: CallNext) -> object:
    # The worker runs handlers outside any request: db.session needs an app context
    # (and each job's session is removed when its context ends).
    with app.app_context():
        return call_next(ctx)


@jobs.task("send_welcome", queue="mail")
def send_welcome(ctx: JobContext) -> dict[str, str]:
    signup = db.session.get_one(Signup, ctx.payload["signup_id"])
    app.logger.info("welcome mail sent to %s", signup.email)
    signup.welcomed = True
    db.session.commit()
    return {"welcomed": signup.email}  # stored in the job's `result` column


@app.cli.command("create-tables")
def create_tables() -> None:
    """Create the app's tables (the jobs table is `sa-jobqueue migrate`'s)."""
    db.metadata.create_all(db.engine, tables=[db.metadata.tables["signups"]])


@app.cli.command("signups")
def list_signups() -> None:
    """Print each signup and whether it was welcomed."""
    for signup in db.session.scalars(db.select(Signup).order_by(Signup.id)):
        print(signup.email, "welcomed" if signup.welcomed else "waiting")
