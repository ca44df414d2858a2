from flask import Blueprint

from shop.models import Signup, db
from shop.tasks import jobs

bp = Blueprint("signups", __name__, cli_group=None)


@bp.post("/signups/<email>")
def sign_up(email: str) -> tuple[dict[str, int], int]:
    signup = Signup(email=email)
    db.session.add(signup)
    db.session.flush()  # assigns signup.id
    jobs.enqueue(db.session, "send_welcome", {"signup_id": signup.id})
    db.session.commit()  # the signup and its job, together
    return {"id": signup.id}, 201


@bp.cli.command("signups")
def list_signups() -> None:
    """Print each signup and whether it was welcomed."""
    for signup in db.session.scalars(db.select(Signup).order_by(Signup.id)):
        print(signup.email, "welcomed" if signup.welcomed else "waiting")
