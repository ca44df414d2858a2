from sa_jobqueue import JobContext, JobQueue

from models import Hero, Job

jobs = JobQueue(Job)


@jobs.task("greet_hero", transactional=True)
def greet_hero(ctx: JobContext) -> None:
    # ctx.session is a SQLAlchemy Session: SQLModel tables work in it as they are.
    hero = ctx.session.get_one(Hero, ctx.payload["hero_id"])
    hero.greeted = True
    print(f"greeted {hero.name}", flush=True)
