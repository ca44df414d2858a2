from flask import Blueprint

from shop.models import Signup, Task, db
from shop.tasks import jobs

bp = Blueprint("signups", __name__, cli_group=None)


@bp.post("/signups/<email>")
def sign_up(email: str) -> tuple[dict[str, int], int]:
    signup = Signup(email=email)
    db.session.add(signup)
    db.session.commit()  # the signup and its welcome job (enqueue_on), together
    return {"id": signup.id}, 201


@bp.post("/exports")
def export_signups() -> tuple[dict[str, str], int]:
    job = jobs.enqueue(db.session, "export_signups")
    db.session.add(Task(id=str(job.id), name="export_signups"))
    db.session.commit()  # the task row and its job, together
    return {"task": str(job.id)}, 202


@bp.get("/tasks/<task_id>")
def show_task(task_id: str) -> dict[str, object]:
    task = db.get_or_404(Task, task_id)
    return {"name": task.name, "progress": task.progress(), "complete": task.complete}


@bp.cli.command("signups")
def list_signups() -> None:
    """Print each signup and whether it was welcomed."""
    for signup in db.session.scalars(db.select(Signup).order_by(Signup.id)):
        print(signup.email, "welcomed" if signup.welcomed else "waiting")


@bp.cli.command("tasks")
def list_tasks() -> None:
    """Print each task row with its job's progress."""
    for task in db.session.scalars(db.select(Task).order_by(Task.id)):
        print(task.name, f"{task.progress():.0%}", "complete" if task.complete else "running")
