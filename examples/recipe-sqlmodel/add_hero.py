from sqlmodel import Session, SQLModel

from models import Hero, engine
from tasks import jobs

# The jobs table is the migration's; create only the SQLModel tables here.
SQLModel.metadata.create_all(engine, tables=[SQLModel.metadata.tables["hero"]])

with Session(engine) as session:
    hero = Hero(name="Deadpond")
    session.add(hero)
    session.flush()
    jobs.enqueue(session, "greet_hero", {"hero_id": hero.id})
    session.commit()
    print(f"hero {hero.id} added with a greet_hero job")
