from flask import Blueprint

from shop.models import Signup, db

bp = Blueprint("signups", __name__, cli_group=None)


@bp.post("/signups/<email>")
def sign_up(email: str) -> tuple[dict[str, int], int]:
    signup = Signup(email=email)
    db.session.add(signup)
    db.session.commit()  # the signup and its welcome job (enqueue_on), together
    return {"id": signup.id}, 201


@bp.cli.command("signups")
def list_signups() -> None:
    """Print each signup and whether it was welcomed."""
    for signup in db.session.scalars(db.select(Signup).order_by(Signup.id)):
        print(signup.email, "welcomed" if signup.welcomed else "waiting")
