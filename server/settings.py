"""Service settings: defaults, overridden by a dict given to ``create_app`` or by
``MEMKIT_*`` environment variables (e.g. ``MEMKIT_DATABASE_URL``)."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field, fields
from pathlib import Path

INSTANCE = Path(os.environ.get("MEMKIT_INSTANCE", Path.cwd() / "instance"))


@dataclass
class Settings:
    database_url: str = f"sqlite:///{INSTANCE / 'memkit.db'}"
    secret_key: str = ""  # HMAC key for codes; generated once into instance/secret_key if empty
    token_ttl_hours: float = 24 * 7
    code_ttl_minutes: float = 10
    code_max_attempts: int = 5
    floor_quota: int = 5  # floors a user may own, their own floor included
    block_quota: int = 20  # blocks a user may own across floors
    smtp_host: str = ""  # empty: e-mail goes to the outbox folder
    smtp_port: int = 25
    mail_from: str = "memkit <no-reply@memkit.invalid>"
    outbox_dir: str = str(INSTANCE / "outbox")
    phone_region: str = ""  # e.g. "GB" to accept national numbers; empty: +E.164 only
    rate_limit_send_code: str = "5 per minute;30 per hour"
    rate_limit_change_email: str = "10 per minute"
    rate_limit_sign_in: str = "20 per minute"
    rate_limit_storage: str = "memory://"
    max_body_bytes: int = 1_000_000
    index_dir: str = ""  # where the search index is saved after a build and loaded at start; empty: rebuilt
    warm_index: bool = False  # build (or load) the search index when the app starts, not on the first query
    pipeline_config: str = ""  # the TOML the query endpoint serves; empty: eval/configs/default.toml
    # "memory": each process holds its own index, caught up from the store's log (server/search/index.py);
    # "postgres": the index lives in PostgreSQL (pgvector, full-text), nothing per process
    # (server/search/store.py); needs a PostgreSQL database_url and a config of pgvector/pgtext
    # retrievers (empty pipeline_config: eval/configs/postgres.toml).
    search_backend: str = "memory"
    extra: dict = field(default_factory=dict)

    @classmethod
    def load(cls, overrides: dict | None = None) -> "Settings":
        values = {}
        for f in fields(cls):
            env = os.environ.get(f"MEMKIT_{f.name.upper()}")
            if env is not None and f.name != "extra":
                if isinstance(f.default, bool):
                    if env.lower() not in ("0", "1", "true", "false"):
                        raise ValueError(f"MEMKIT_{f.name.upper()}: expected 0, 1, true or false, got {env!r}")
                    values[f.name] = env.lower() in ("1", "true")
                else:
                    values[f.name] = type(f.default)(env) if not isinstance(f.default, str) else env
        values.update(overrides or {})
        unknown = set(values) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown setting(s): {sorted(unknown)}")
        s = cls(**values)
        if s.search_backend not in ("memory", "postgres"):
            raise ValueError(f"search_backend: expected 'memory' or 'postgres', got {s.search_backend!r}")
        if s.search_backend == "postgres" and not s.database_url.startswith(("postgresql://", "postgresql+")):
            raise ValueError("search_backend = 'postgres' (MEMKIT_SEARCH_BACKEND) keeps the search index in the store "
                             "and needs a PostgreSQL database_url (MEMKIT_DATABASE_URL=postgresql://...), "
                             f"not {s.database_url.split(':', 1)[0]}")
        if not s.secret_key:
            s.secret_key = _instance_secret()
        return s


def _instance_secret() -> str:
    path = INSTANCE / "secret_key"
    if not path.exists():
        INSTANCE.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_hex(32))
        path.chmod(0o600)
    return path.read_text().strip()
