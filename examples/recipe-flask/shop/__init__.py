import os
from collections.abc import Mapping
from typing import Any

from flask import Flask
from flask_migrate import Migrate
from sa_jobqueue.migration import include_object

from shop.models import db
from shop.tasks import flask_jobs
from shop.views import bp


def only_our_tables(name: str | None, type_: str, parent_names: object) -> bool:
    # Autogenerate compares only the tables this app declares, not the database's others.
    return type_ != "table" or name in db.metadata.tables


# include_object: autogenerate leaves alone what the jobs tables have and no model declares
# (MariaDB's and MySQL's generated key columns); Flask-Migrate passes both to Alembic.
migrate = Migrate(include_name=only_our_tables, include_object=include_object)


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.from_mapping(
        SQLALCHEMY_DATABASE_URI=os.environ.get("DATABASE_URL", "sqlite:///app.db"),
        MAIL_SENDER="shop@example.com",
    )
    app.config.from_mapping(config or {})
    db.init_app(app)
    migrate.init_app(app, db)
    flask_jobs.init_app(app)
    app.register_blueprint(bp)
    return app
