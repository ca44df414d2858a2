"""A Flask app factory with Flask-SQLAlchemy and `JobQueueExtension`, as docs/recipes/flask.md.

Module level holds what every app shares (``db``, the `JobQueue`, its tasks, the
extension); `create_app(config)` builds one app per config, so a test session can hold
several, each with its own database. A process started as ``flask --app
"tests.support.apps.flask_factory:create_app()" jobs worker`` takes its config from
``FLASK_*`` variables (``FLASK_SQLALCHEMY_DATABASE_URI``, ``FLASK_EXPORTER``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Flask, current_app
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from sa_jobqueue import JobContext, JobMixin, JobQueue
from sa_jobqueue.flask import JobQueueExtension


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base)


class FlaskJob(JobMixin, Base):
    __tablename__ = "jobs"


class Export(Base):
    __tablename__ = "exports"

    id: Mapped[int] = mapped_column(primary_key=True)
    user: Mapped[str] = mapped_column(String(100))
    made_by: Mapped[str | None] = mapped_column(String(100))


jobs = JobQueue(FlaskJob)
flask_jobs = JobQueueExtension(jobs)


@jobs.task("export_posts", queue="exports", max_attempts=3)
def export_posts(ctx: JobContext) -> dict[str, Any]:
    """Record the export with the app's ``db.session``, naming the app's ``EXPORTER``."""
    made_by = current_app.config["EXPORTER"]
    db.session.add(Export(user=ctx.payload["user"], made_by=made_by))
    db.session.commit()
    return {"made_by": made_by, "database": db.engine.url.database}


@jobs.task("export_async", queue="exports")
async def export_async(ctx: JobContext) -> dict[str, Any]:
    """An ``async def`` handler sees the app's context too."""
    return {"made_by": current_app.config["EXPORTER"]}


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """One app: `config` over the defaults (``SQLALCHEMY_DATABASE_URI``, ``EXPORTER``)."""
    app = Flask(__name__)
    app.config.from_mapping(SQLALCHEMY_DATABASE_URI="postgresql+psycopg://", EXPORTER="factory")
    app.config.from_prefixed_env()
    app.config.from_mapping(config or {})
    db.init_app(app)
    flask_jobs.init_app(app)

    @app.post("/exports/<user>")
    def request_export(user: str) -> tuple[dict[str, int], int]:
        job = jobs.enqueue(db.session, "export_posts", {"user": user})
        db.session.commit()
        return {"job": job.id}, 202

    return app
