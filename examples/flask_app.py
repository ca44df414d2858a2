"""A Flask + Flask-SQLAlchemy app with a job queue in its own database.

The view enqueues a job in the request's ``db.session`` (the signup and its job commit
together), and the lease-mode handler uses ``db.session`` too: `JobQueueExtension` runs
each job in the app's context, without which Flask-SQLAlchemy raises
``RuntimeError: Working outside of application context``. The handler's return value
is stored in the job's ``result`` column.

Run it against a database you can write to (it creates ``jobs`` and ``signups``)::

    DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/scratch python examples/flask_app.py

or serve it and run the worker beside it::

    flask --app examples/flask_app.py run
    flask --app examples/flask_app.py jobs worker --queue mail

The one-file style of an app; docs/recipes/flask.md builds the same with an app factory.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any

from flask import Flask, jsonify
from flask_sqlalchemy import SQLAlchemy
from sa_jobqueue import JobContext, JobMixin, JobQueue, migration
from sa_jobqueue.flask import JobQueueExtension
from sqlalchemy import DateTime, Integer, Text, select
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base)


class Job(JobMixin, Base):  # Base, not db.Model: the same metadata, typed
    __tablename__ = "jobs"


class Signup(Base):
    __tablename__ = "signups"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    email: Mapped[str] = mapped_column(Text)
    welcomed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


app = Flask(__name__)
app.config["SQLALCHEMY_DATABASE_URI"] = os.environ.get("DATABASE_URL", DEFAULT_URL)
db.init_app(app)

jobs = JobQueue(Job)
flask_jobs = JobQueueExtension(jobs, app)  # handlers in the app's context; flask jobs


@app.post("/signups/<email>")
def sign_up(email: str) -> Any:
    signup = Signup(email=email)
    db.session.add(signup)
    db.session.flush()
    jobs.enqueue(db.session, "send_welcome", {"signup_id": signup.id})
    db.session.commit()  # the signup and its job, or neither
    return jsonify(id=signup.id), 201


@jobs.task("send_welcome", queue="mail")
def send_welcome(ctx: JobContext) -> dict[str, Any]:
    """Lease mode (no ``ctx.session``): the app's own ``db.session``, in its own transaction."""
    signup = db.session.get(Signup, ctx.payload["signup_id"])
    if signup is None:
        return {"skipped": "no such signup"}
    if signup.welcomed_at is None:  # idempotent: a second attempt sends nothing twice
        signup.welcomed_at = datetime.now(timezone.utc)
        db.session.commit()
    return {"welcomed": signup.email, "attempt": ctx.attempt}


def main() -> list[tuple[str, str, Any]]:
    """Migrate, sign two people up, run their jobs; return (email, status, result) rows."""
    migration.upgrade(app.config["SQLALCHEMY_DATABASE_URI"])
    with app.app_context():
        db.create_all()  # signups (the jobs table comes from the migration)
    client = app.test_client()
    for email in ("ada@example.com", "alan@example.com"):
        answer = client.post(f"/signups/{email}")
        assert answer.status_code == 201, answer.text
    with app.app_context():
        ran = flask_jobs.worker(app, queues=["mail"]).drain()
        rows = db.session.execute(
            select(Signup.email, Job.status, Job.result)
            .join(Job, Job.payload["signup_id"].as_integer() == Signup.id)
            .order_by(Signup.id)
        ).all()
    print(f"ran {ran} jobs")
    for email, status, result in rows:
        print(f"{email:20} {status:8} {result}")
    return [tuple(row) for row in rows]


if __name__ == "__main__":
    main()
