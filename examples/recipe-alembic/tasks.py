import os

from sa_jobqueue import JobContext, JobQueue
from sqlalchemy import create_engine

from models import Job, Post

engine = create_engine(os.environ["DATABASE_URL"])
jobs = JobQueue(Job)


@jobs.task("announce_post", transactional=True)
def announce_post(ctx: JobContext) -> None:
    post = ctx.session.get_one(Post, ctx.payload["post_id"])
    print(f"announced {post.title!r}", flush=True)
