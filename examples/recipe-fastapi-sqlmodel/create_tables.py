from sqlmodel import SQLModel

from models import User, engine

# The jobs table is `sa-jobqueue migrate`'s (or your Alembic history's); create the rest.
SQLModel.metadata.create_all(engine, tables=[User.__table__])
print("created the user table")
