"""Alembic environment for `sa-jobqueue migrate` (the library's own revisions).

Users who run Alembic themselves do not use this file: they add the versions
directory to their own environment's ``version_locations`` (docs/migrations.md).
"""

from __future__ import annotations

from sqlalchemy import create_engine, pool

from alembic import context
from sa_jobqueue.migration.scripts import lock_migrations, version_table

config = context.config
# `sa_jobqueue.migration.upgrade` passes the connection whose transaction holds
# the migration lock; `alembic -c ...` pointed here directly passes a URL.
shared = config.attributes.get("connection")
url = config.attributes.get("sa_jobqueue_url") or config.get_main_option("sqlalchemy.url")
table = (
    context.get_x_argument(as_dictionary=True).get("sa_jobqueue_table")
    or config.attributes.get("sa_jobqueue_table")
    or "jobs"
)

if shared is None and not url:
    raise RuntimeError("no database URL: pass --database-url or set DATABASE_URL")

if shared is not None:
    context.configure(connection=shared, version_table=version_table(table))
    with context.begin_transaction():
        context.run_migrations()
elif context.is_offline_mode():
    context.configure(url=url, version_table=version_table(table), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, version_table=version_table(table))
        with context.begin_transaction():
            lock_migrations(connection, table)
            context.run_migrations()
    engine.dispose()
