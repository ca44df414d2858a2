from shop import create_app
from shop.models import Signup, db
from shop.tasks import flask_jobs


def test_a_signup_is_welcomed() -> None:
    app = create_app({"TESTING": True, "MAIL_SENDER": "tests@example.com"})
    response = app.test_client().post("/signups/grace@example.com")
    assert response.status_code == 201
    assert flask_jobs.worker(app, queues=["mail"]).drain() == 1
    with app.app_context():
        assert db.session.get_one(Signup, response.get_json()["id"]).welcomed
