from sqlalchemy.orm import Session

from models import Post
from tasks import engine, jobs

with Session(engine) as session, session.begin():
    post = Post(title="Hello, queue", summary="a first post")
    session.add(post)
    session.flush()
    jobs.enqueue(session, "announce_post", {"post_id": post.id})
print("published")
