from fastapi.testclient import TestClient

from app import app

with TestClient(app) as client:
    response = client.post("/users/", json={"email": "ada@example.com", "full_name": "Ada"})
    print(response.status_code, response.json())
