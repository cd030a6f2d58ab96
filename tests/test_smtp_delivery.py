"""Codes delivered over real SMTP: an aiosmtpd server on loopback receives them, and the
test completes sign-up validation and a change of e-mail with the codes it read."""

import re
import socket
from email import message_from_bytes

import pytest
from aiosmtpd.controller import Controller

from server import create_app


class Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((envelope.rcpt_tos, message_from_bytes(envelope.content)))
        return "250 OK"

    def code_for(self, to: str) -> str:
        for rcpt, msg in reversed(self.messages):
            if to in rcpt:
                return re.search(r"code is (\d{6})", msg.get_payload()).group(1)
        raise AssertionError(f"no message to {to}")


@pytest.fixture
def smtp():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    yield inbox, port
    controller.stop()


def smtp_app(port: int, tmp_path):
    """The service on a fresh SQLite file, sending e-mail to the SMTP server on ``port``."""
    return create_app(
        {
            "database_url": f"sqlite:///{tmp_path / 'm.db'}",
            "smtp_host": "127.0.0.1",
            "smtp_port": port,
            "outbox_dir": str(tmp_path / "outbox"),
            "secret_key": "k",
        }
    )


def test_change_email_with_codes_read_from_a_real_smtp_server(smtp, tmp_path):
    inbox, port = smtp
    app = smtp_app(port, tmp_path)
    c = app.test_client()
    assert (
        c.post(
            "/auth-service/signup",
            json={"name": "Ann", "email": "ann@example.com", "password": "pass words"},
        ).status_code
        == 200
    )
    rcpt, msg = inbox.messages[-1]
    assert rcpt == ["ann@example.com"] and "memkit code" in msg["Subject"]
    r = c.post(
        "/auth-service/validate",
        json={
            "email": "ann@example.com",
            "code": inbox.code_for("ann@example.com"),
            "password": "pass words",
        },
    )
    token = r.get_json()["token"]
    auth = {"Authorization": f"Bearer {token}"}
    assert (
        c.post(
            "/auth-service/send/validation/code",
            headers=auth,
            json={
                "mode": "change_email",
                "new_email_id": "ann@elsewhere.example",
                "password": "pass words",
            },
        ).status_code
        == 200
    )
    code = inbox.code_for("ann@elsewhere.example")
    r = c.post(
        "/auth-service/change/email",
        headers=auth,
        data={"new_email_id": "ann@elsewhere.example", "activation_code": code},
        content_type="multipart/form-data",
    )
    assert r.status_code == 200 and r.get_json()["profile"]["email"] == "ann@elsewhere.example"
    rcpt, msg = inbox.messages[-1]  # the old address is told
    assert rcpt == ["ann@example.com"] and "was changed" in msg["Subject"]
    assert not (tmp_path / "outbox").exists()  # with SMTP configured nothing goes to the outbox


def test_smtp_failure_changes_nothing(tmp_path):
    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(
        {
            "database_url": f"sqlite:///{tmp_path / 'm.db'}",
            "smtp_host": "127.0.0.1",
            "smtp_port": port,
            "secret_key": "k",
        }
    )
    c = app.test_client()
    r = c.post(
        "/auth-service/signup",
        json={"name": "Ann", "email": "ann@example.com", "password": "pass words"},
    )
    assert r.status_code == 503 and r.get_json()["error"]["code"] == "delivery_failed"
    assert "Traceback" not in r.get_data(as_text=True)
    # The sign-up was rolled back with the failed delivery: the address is still free.
    import sqlalchemy as sa

    from server.store.schema import users

    with app.extensions["memkit"]["engine"].connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(users)).scalar() == 0
