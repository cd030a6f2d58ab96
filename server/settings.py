"""Service settings: defaults, overridden by a dict given to ``create_app`` or by
``MEMKIT_*`` environment variables (e.g. ``MEMKIT_DATABASE_URL``)."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field, fields
from pathlib import Path

from memkit.private import private_dir, write_private

INSTANCE = Path(os.environ.get("MEMKIT_INSTANCE", Path.cwd() / "instance"))


@dataclass
class Settings:
    database_url: str = f"sqlite:///{INSTANCE / 'memkit.db'}"
    secret_key: str = ""  # HMAC key for codes; generated once into instance/secret_key if empty
    token_ttl_hours: float = 24.0 * 7
    code_ttl_minutes: float = 10.0
    code_max_attempts: int = 5  # checks of one code (right or wrong); then it is burned
    code_checks_per_hour: int = 20  # checks of all codes of one account and mode in the last hour
    signup_ttl_hours: float = (
        24.0  # a sign-up nobody validated in this time is deleted; its address is free
    )
    floor_quota: int = 5  # floors a user may own, their own floor included
    block_quota: int = 20  # blocks a user may own across floors
    smtp_host: str = ""  # empty: e-mail goes to the outbox folder
    smtp_port: int = 25
    mail_from: str = "memkit <no-reply@memkit.invalid>"
    outbox_dir: str = str(INSTANCE / "outbox")
    phone_region: str = ""  # e.g. "GB" to accept national numbers; empty: +E.164 only
    # Rate limits per account (server/api/limits.py); per client address: these times
    # rate_limit_address_factor.
    rate_limit_send_code: str = "5 per minute;30 per hour"
    rate_limit_change_email: str = "10 per minute"
    rate_limit_sign_in: str = "20 per minute"
    rate_limit_sign_up: str = "5 per minute;30 per hour"
    rate_limit_check_code: str = (
        "10 per minute;60 per hour"  # validate, reset/password, change/mobile
    )
    # Failed credentials only (server/api/limits.py FailedCredentials): a wrong password given
    # with a token (change password, delete account, ask for a change-of-address code) per user;
    # a wrong application secret per application id.
    rate_limit_password: str = "10 per minute;30 per hour"
    rate_limit_app_secret: str = "20 per minute"
    rate_limit_address_factor: int = 5
    # Writes (posts, batches, edits): kilobytes of request bodies per user (per client network:
    # times rate_limit_address_factor). A megabyte of posts is tens of core-seconds of encoding.
    rate_limit_write: str = "2000 per minute;20000 per hour"
    # Seconds before a refused application-secret request's 429 (server/api/limits.py
    # RefuseUnchecked): `memkit serve`, a thread per connection, sets 1; keep 0 under a pool of
    # threads (gunicorn), where a waiting answer would hold a thread.
    refused_delay: float = 0.0
    rate_limit_storage: str = "memory://"
    max_body_bytes: int = 1_000_000
    index_dir: str = (
        ""  # where the search index is saved after a build and loaded at start; empty: rebuilt
    )
    warm_index: bool = (
        False  # build (or load) the search index when the app starts, not on the first query
    )
    catch_up_seconds: float = (
        1.0  # the in-memory index applies every floor's changes this often (0: only on demand)
    )
    # How long a query waits for other users' writes to its floors to be indexed (its own, it
    # always waits for); with catch_up_seconds = 0 nothing applies them in the background, so
    # a query applies them itself, however long that takes.
    others_writes_wait: float = 1.0
    pipeline_config: str = (
        ""  # the TOML the query endpoint serves; empty: eval/configs/default.toml
    )
    # "memory": each process holds its own index, caught up from the store's log
    # (server/search/index.py); "postgres": the index lives in PostgreSQL (pgvector,
    # full-text), nothing per process (server/search/store.py); needs a PostgreSQL
    # database_url and a config of pgvector/pgtext retrievers (empty pipeline_config:
    # eval/configs/postgres.toml).
    search_backend: str = "memory"
    extra: dict = field(default_factory=dict)

    @classmethod
    def load(cls, overrides: dict | None = None) -> "Settings":
        values = {}
        for f in fields(cls):
            env = os.environ.get(f"MEMKIT_{f.name.upper()}")
            if env is not None and f.name != "extra":
                values[f.name] = _from_env(f"MEMKIT_{f.name.upper()}", env, f.type)
        values.update(overrides or {})
        unknown = set(values) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown setting(s): {sorted(unknown)}")
        s = cls(**values)
        if s.search_backend not in ("memory", "postgres"):
            raise ValueError(
                f"search_backend: expected 'memory' or 'postgres', got {s.search_backend!r}"
            )
        if s.search_backend == "postgres" and not s.database_url.startswith(
            ("postgresql://", "postgresql+")
        ):
            raise ValueError(
                "search_backend = 'postgres' (MEMKIT_SEARCH_BACKEND) keeps the search index in "
                "the store and needs a PostgreSQL database_url "
                f"(MEMKIT_DATABASE_URL=postgresql://...), not {s.database_url.split(':', 1)[0]}"
            )
        for name in (
            "token_ttl_hours",
            "code_ttl_minutes",
            "code_max_attempts",
            "code_checks_per_hour",
            "signup_ttl_hours",
        ):
            if not getattr(s, name) > 0:
                raise ValueError(f"{name}: expected a positive number, got {getattr(s, name)!r}")
        if not s.secret_key:
            s.secret_key = _instance_secret()
        return s


def _from_env(name: str, text: str, kind: str):
    """An environment variable's text as the setting's declared type (the annotation, not
    the default's type: ``MEMKIT_TOKEN_TTL_HOURS=0.001`` is a float even though the
    default is a whole number of hours)."""
    try:
        if kind == "bool":
            if text.lower() not in ("0", "1", "true", "false"):
                raise ValueError
            return text.lower() in ("1", "true")
        return {"int": int, "float": float}.get(kind, str)(text)
    except ValueError:
        expected = {"bool": "0, 1, true or false", "int": "a whole number", "float": "a number"}[
            kind
        ]
        raise ValueError(f"{name}: expected {expected}, got {text!r}") from None


def _instance_secret() -> str:
    path = INSTANCE / "secret_key"
    if not path.exists():
        private_dir(INSTANCE)
        write_private(path, secrets.token_hex(32))
    return path.read_text().strip()
