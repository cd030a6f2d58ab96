"""The memkit service: ``create_app(config)`` builds the Flask app (server/app.py).

Blueprints in ``server/api`` parse requests and shape responses; the rules live in
``server/services`` (no Flask there); the store in ``server/store``.

Importing the package imports none of the app: the ``memkit`` command reads the service's
subcommands from ``server/cli.py`` on every call (``memkit eval`` too), and the app's
imports (Flask, the accounts' hashing and validators, SQLAlchemy) took 0.6 s of each.
"""

from __future__ import annotations


def create_app(config: dict | None = None, *, sms=None):
    """The Flask app (``server.app.create_app``)."""
    from server.app import create_app as build

    return build(config, sms=sms)
