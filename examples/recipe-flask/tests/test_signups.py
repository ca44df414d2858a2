from pathlib import Path

import pytest
from flask import Flask

from shop import create_app
from shop.models import Signup, Task, db
from shop.tasks import flask_jobs


@pytest.fixture
def app(tmp_path: Path) -> Flask:
    app = create_app(
        {
            "TESTING": True,
            "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'test.db'}",
            "MAIL_SENDER": "tests@example.com",
        }
    )
    with app.app_context():
        db.create_all()
    return app


def test_a_signup_is_welcomed(app: Flask) -> None:
    response = app.test_client().post("/signups/grace@example.com")
    assert response.status_code == 201
    assert flask_jobs.worker(app, queues=["mail"]).drain() == 1
    with app.app_context():
        assert db.session.get_one(Signup, response.get_json()["id"]).welcomed


def test_an_export_completes_its_task(app: Flask) -> None:
    client = app.test_client()
    client.post("/signups/grace@example.com")
    task = client.post("/exports").get_json()["task"]
    assert client.get(f"/tasks/{task}").get_json()["progress"] == 0.0
    assert flask_jobs.worker(app, queues=["exports"]).drain() == 1
    assert client.get(f"/tasks/{task}").get_json() == {
        "name": "export_signups",
        "progress": 1.0,
        "complete": True,
    }
    with app.app_context():
        assert db.session.get_one(Task, task).complete
