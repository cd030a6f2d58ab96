"""The Flask app: ``create_app(config)`` (``server.create_app`` calls it).

Blueprints in ``server/api`` parse requests and shape responses; the rules live in
``server/services`` (no Flask there); the store in ``server/store``.
"""

from __future__ import annotations

import logging
import sys
import time

from flask import Flask, g, request
from flask_limiter import Limiter
from werkzeug.middleware.proxy_fix import ProxyFix

from memkit.core.threads import single_threaded_blas
from server import errors
from server.api.strict_json import StrictJSONProvider, check_url
from server.services.accounts import Accounts
from server.services.delivery import OutboxSender, SmtpSender
from server.services.events import Events
from server.services.floors import Floors
from server.services.memory import Memory
from server.settings import Settings
from server.store import connect

requests_log = logging.getLogger("memkit.server.requests")


def create_app(config: dict | None = None, *, sms=None) -> Flask:
    """The service, with ``config`` over ``MEMKIT_*`` variables over the defaults
    (server/settings.py). ``sms``: what sends text messages (a ``Sender``:
    ``send(to, subject, text)``); by default they are written to the outbox folder, as
    e-mail is when no SMTP host is set."""
    # Requests run side by side; none gains from splitting its products (memkit/core/threads.py).
    single_threaded_blas()
    # A question's thread waiting for the GIL while writes' threads run Python between
    # their runs of the model gets it within 1 ms, not CPython's 5 (SECURITY.md measures
    # another user's median while four 1 MB writes run).
    sys.setswitchinterval(0.001)
    settings = Settings.load(config)
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.json = StrictJSONProvider(
        app
    )  # bodies: UTF-8, finite, shallow, storable text (server/api/strict_json.py)
    app.json.sort_keys = False
    engine = connect(settings.database_url)
    mailer = (
        SmtpSender(settings.smtp_host, settings.smtp_port, settings.mail_from)
        if settings.smtp_host
        else OutboxSender(settings.outbox_dir, "email")
    )
    sms = sms or OutboxSender(settings.outbox_dir, "sms")
    memory = Memory(engine, settings)
    app.extensions["memkit"] = {
        "settings": settings,
        "engine": engine,
        "accounts": Accounts(engine, settings, mailer, sms, vectors=memory.vectors),
        "floors": Floors(engine, settings),
        "events": Events(
            engine,
            indexer=memory.indexer,
            after_write=memory.catch_up,
            before_write=memory.encode_ahead,
            vectors=memory.vectors,
        ),
        "memory": memory,
    }
    from server.api.limits import (
        STRATEGY,
        ChunkedBody,
        FailedCredentials,
        Questions,
        RefuseUnchecked,
        Tarpit,
        client_network,
        make_limits,
        storage_uri,
    )

    # No X-RateLimit-*/Retry-After headers on every answer: Retry-After goes with a 429
    # only (server/errors.py), where it says when to try again.
    limiter = Limiter(
        client_network,  # per client network: an IPv4 /24, an IPv6 /64 (server/api/limits.py)
        app=app,
        storage_uri=storage_uri(settings.rate_limit_storage),
        strategy=STRATEGY,
        headers_enabled=False,
        key_prefix="memkit",
    )
    app.extensions["memkit"]["limiter"] = limiter
    errors.register(app)

    from server.api import auth, floors, memory, openapi

    failed = app.extensions["memkit"]["failed_credentials"] = FailedCredentials(limiter, settings)
    app.extensions["memkit"]["questions"] = Questions(limiter, settings)
    accounts = app.extensions["memkit"]["accounts"]
    # A chunked body is read, bounded, into one of known length before Flask sees it.
    app.wsgi_app = ChunkedBody(app.wsgi_app, settings.max_body_bytes, settings.auth_body_bytes)
    # Account operations' refusals and code requests answered late under memkit serve.
    app.wsgi_app = Tarpit(app.wsgi_app, settings.refused_delay)
    app.wsgi_app = RefuseUnchecked(
        app.wsgi_app,
        failed,
        accounts.known_app,
        settings.refused_delay,
        app_registered=accounts.app_registered,
    )
    if settings.trusted_proxies:
        # Outermost, so that every count (RefuseUnchecked's too) sees the client's address,
        # as the first trusted proxy saw it, not the proxy's own (every client would share
        # one count).
        n = settings.trusted_proxies
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=n, x_proto=n, x_host=n)
    app.register_blueprint(auth.make_blueprint(make_limits(limiter, settings)))
    app.register_blueprint(floors.bp)
    app.register_blueprint(floors.events_bp)
    app.register_blueprint(memory.bp)
    app.register_blueprint(openapi.bp)

    if settings.search_backend == "postgres" or settings.warm_index:
        # postgres: cheap (the search tables and their foreign keys, no index to build);
        # memory with warm_index (e.g. each gunicorn worker): ready before its first request.
        app.extensions["memkit"]["memory"].warm(settle=settings.warm_index)

    @app.before_request
    def _started():
        g.started = time.perf_counter()
        check_url()

    @app.after_request
    def _log_request(response):
        # Method, path (no query string, no headers, no body: nothing secret) and outcome.
        took = (time.perf_counter() - g.get("started", time.perf_counter())) * 1000
        requests_log.info(
            "%s %s %s %.1f ms", request.method, request.path, response.status_code, took
        )
        return response

    return app
