import os
from logging.config import fileConfig

from alembic import context
from sqlalchemy import create_engine, pool

from models import Base

config = context.config
if config.config_file_name is not None:
    fileConfig(config.config_file_name)

target_metadata = Base.metadata


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    # Compare only the tables this application declares.
    if type_ == "table":
        return name in target_metadata.tables
    return True


engine = create_engine(os.environ["DATABASE_URL"], poolclass=pool.NullPool)
with engine.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_name=include_name,
    )
    with context.begin_transaction():
        context.run_migrations()
