"""Every failing request leaves the whole store as it was (all tables compared), for each
operation's error cases. Code attempts are the one deliberate exception (counted so that
codes burn), so the codes table is compared without its attempts column."""

from tests.service_fixtures import all_rows, error_of, outbox_code

PW = "correct horse battery"


def store(app):
    return all_rows(app, skip=("codes.attempts",))


def setup(c, app):
    c.post("/auth-service/signup", json={"name": "Ann", "email": "ann@example.com", "password": PW})
    tok = c.post(
        "/auth-service/validate",
        json={
            "email": "ann@example.com",
            "code": outbox_code(app, "ann@example.com"),
            "password": PW,
        },
    ).get_json()["token"]
    h = {"Authorization": f"Bearer {tok}"}
    pod = c.get("/auth-service/profile", headers=h).get_json()["pod_info"]
    ev = c.post(
        f"/floors/{pod['floor_uid']}/blocks/{pod['blocks'][0]['block_id']}/events",
        headers=h,
        json={"text": "first"},
    ).get_json()
    c.post(
        "/auth-service/send/validation/code",
        headers=h,
        json={"mode": "change_mobile", "new_mobile": "+447911123456", "password": PW},
    )
    c.post(
        "/auth-service/send/validation/code",
        json={"mode": "reset_password", "email": "ann@example.com"},
    )
    return h, pod["floor_uid"], pod["blocks"][0]["block_id"], ev["event_id"]


def test_failed_requests_change_nothing(app):
    c = app.test_client()
    h, floor, block, event = setup(c, app)
    app_id, secret = app.extensions["memkit"]["accounts"].register_app("widget")
    before = store(app)
    bad = "000000"
    failing = [
        (
            "post",
            "/auth-service/signup",
            {"json": {"name": "Ann", "email": "ann@example.com", "password": PW}},
            409,
        ),
        (
            "post",
            "/auth-service/validate",
            {"json": {"email": "ann@example.com", "code": bad, "password": PW}},
            400,
        ),
        (
            "post",
            "/auth-service/signin/email",
            {"json": {"email": "ann@example.com", "password": "wrong one!"}},
            401,
        ),
        (
            "post",
            "/auth-service/signin/mobile",
            {"json": {"mobile": "+447911123456", "password": PW}},
            401,
        ),
        (
            "post",
            "/auth-service/change/password",
            {"headers": h, "json": {"old_password": "wrong one!", "new_password": "whatever 123"}},
            400,
        ),
        (
            "post",
            "/auth-service/change/password",
            {"headers": h, "json": {"old_password": PW, "new_password": "short"}},
            400,
        ),
        (
            "post",
            "/auth-service/reset/password",
            {"json": {"email": "ann@example.com", "code": bad, "new_password": "whatever 123"}},
            400,
        ),
        (
            "post",
            "/auth-service/reset/password",
            {"json": {"email": "ann@example.com", "code": bad, "new_password": "x"}},
            400,
        ),
        (
            "post",
            "/auth-service/change/mobile",
            {"headers": h, "json": {"new_mobile": "+447911123456", "code": bad}},
            400,
        ),
        (
            "post",
            "/auth-service/change/mobile",
            {"headers": h, "json": {"new_mobile": "12", "code": bad}},
            400,
        ),
        (
            "post",
            "/auth-service/change/email",
            {"headers": h, "json": {"new_email_id": "a@new.example", "activation_code": bad}},
            400,
        ),
        ("post", "/auth-service/send/validation/code", {"json": {"mode": "teleport"}}, 400),
        (
            "post",
            "/auth-service/send/validation/code",
            {"json": {"mode": "change_email", "new_email_id": "a@new.example"}},
            400,
        ),
        (
            "post",
            "/auth-service/external/register",
            {"headers": {"X-App-Id": app_id, "X-App-Secret": "nope"}, "json": {"external_id": "x"}},
            401,
        ),
        (
            "post",
            "/auth-service/external/register",
            {"headers": {"X-App-Id": app_id, "X-App-Secret": secret}, "json": {"external_id": ""}},
            400,
        ),
        (
            "delete",
            "/auth-service/account",
            {"headers": h, "json": {"password": "wrong one!"}},
            400,
        ),
        ("post", "/floors", {"headers": h, "json": {"title": ""}}, 400),
        ("patch", f"/floors/{floor}", {"headers": h, "json": {"title": "x" * 201}}, 400),
        ("post", f"/floors/{floor}/rename", {"headers": h, "json": {"name": "x"}}, 400),
        (
            "post",
            f"/floors/{floor}/blocks",
            {"headers": h, "json": {"block_type": 9, "title": "x"}},
            400,
        ),
        (
            "post",
            f"/floors/{floor}/blocks/{block}/events",
            {"headers": h, "json": {"text": "x", "tags": [1]}},
            400,
        ),
        (
            "post",
            f"/floors/{floor}/blocks/{block}/events",
            {"headers": h, "json": {"text": "x", "reply_to": "e_nope"}},
            404,
        ),
        ("patch", f"/events/{event}", {"headers": h, "json": {"text": ""}}, 400),
        ("patch", f"/events/{event}", {"headers": h, "json": {}}, 400),
        ("delete", "/events/e_nope", {"headers": h}, 404),
        ("post", f"/floors/{floor}/private", {}, 401),
    ]
    for method, path, kw, status in failing:
        r = getattr(c, method)(path, **kw)
        assert r.status_code == status, (method, path, r.get_json())
        error_of(r)
        assert store(app) == before, (method, path)
