from sqlmodel import SQLModel

from models import engine

# The jobs table is `sa-jobqueue migrate`'s (or your Alembic history's); create the rest.
SQLModel.metadata.create_all(engine, tables=[SQLModel.metadata.tables["user"]])
print("created the user table")
