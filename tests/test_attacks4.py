"""The attacks of issue 42 ("hardening, round 4"), each performed as the attacker did. Every
test here failed before its fix; SECURITY.md ("Round 4") lists them by finding.
"""

from __future__ import annotations

from tests.service_fixtures import error_of
from tests.test_attacks3 import EXTERNAL, Q, from_address, sqlite_app
from tests.test_attacks3 import argon2 as argon2  # the fixture counting argon2 calls


# -- 1. failed credentials of identities that do not exist ------------------------------------
def test_a_wrong_secret_for_an_unknown_application_costs_no_argon2_work(
    tmp_path, tmp_path_factory, argon2
):
    app = sqlite_app(tmp_path, tmp_path_factory)
    c = app.test_client()
    app_id, _ = app.extensions["memkit"]["accounts"].register_app("widget")
    argon2.calls = 0
    for i, path in enumerate([Q, EXTERNAL] * 3):
        r = c.post(
            path,
            headers={"X-App-Id": f"app_nope{i}", "X-App-Secret": "x"},
            json={"external_id": "e1"},
            **from_address(f"10.0.{i}.1"),
        )
        assert r.status_code == 401 and error_of(r)["code"] == "bad_app_credentials"
    assert argon2.calls == 0
    # A registered application's wrong secret is still checked, and answered the same.
    r = c.post(EXTERNAL, headers={"X-App-Id": app_id, "X-App-Secret": "x"}, json={})
    assert r.status_code == 401 and error_of(r)["code"] == "bad_app_credentials"
    assert argon2.calls == 1


def test_counts_per_client_address_are_kept_per_network(tmp_path, tmp_path_factory):
    """IPv4 addresses count per /24, IPv6 addresses per /64: a flood from new addresses of
    one network is one count."""
    app = sqlite_app(
        tmp_path,
        tmp_path_factory,
        rate_limit_sign_in="3 per minute",
        rate_limit_app_secret="2 per minute",
        rate_limit_address_factor=1,
    )
    c = app.test_client()

    def sign_in(i, address):  # a new account each time: only the address's count can refuse
        return c.post(
            "/auth-service/signin/email",
            json={"email": f"nobody{i}@example.com", "password": "wrong password"},
            **from_address(address),
        ).status_code

    for network, same, other in (
        (["10.1.2.3", "10.1.2.4", "10.1.2.5"], "10.1.2.200", "10.1.3.1"),
        (
            ["2001:db8:1:2::1", "2001:db8:1:2:ffff::9", "2001:db8:1:2::3"],
            "2001:db8:1:2:abcd::1",
            "2001:db8:1:3::1",
        ),
    ):
        assert [sign_in(i, a) for i, a in enumerate(network)] == [401] * 3
        assert sign_in(10, same) == 429
        assert sign_in(11, other) == 401

    def wrong_secret(i, address):  # failed credentials: a new application id each time
        return c.post(
            Q, headers={"X-App-Id": f"app_nope{i}", "X-App-Secret": "x"}, **from_address(address)
        ).status_code

    assert [wrong_secret(i, f"10.7.7.{i}") for i in range(1, 4)] == [401, 401, 429]
    assert wrong_secret(4, "10.7.8.1") == 401
