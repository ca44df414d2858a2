from shop import create_app

app = create_app()
with app.test_client() as client:
    response = client.post("/signups/ada@example.com")
    print(response.status_code, response.get_json())
    task = client.post("/exports").get_json()["task"]
    print(client.get(f"/tasks/{task}").get_json())
