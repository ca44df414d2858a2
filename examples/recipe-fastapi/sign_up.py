from fastapi.testclient import TestClient

from app import app

with TestClient(app) as client:
    response = client.post("/signups/ada@example.com")
    print(response.status_code, response.json())
