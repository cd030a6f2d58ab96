"""Service settings: one typed model (pydantic-settings). Each setting is a field with its
type, bound and default, read from a ``MEMKIT_<NAME>`` environment variable (e.g.
``MEMKIT_DATABASE_URL``) or from the dict given to ``create_app``, which wins over the
environment. A bad value is a ``ValueError`` naming the variable or key and what was
expected; a key the model does not have is refused.

To add a setting, add a field here (its comment says what it does); the service reads it
as ``settings.<name>``, and ``MEMKIT_<NAME>`` sets it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, PositiveFloat, PositiveInt, model_validator
from pydantic import ValidationError as PydanticError
from pydantic_settings import BaseSettings, SettingsConfigDict

from memkit.core.private import private_dir, write_private

INSTANCE = Path(os.environ.get("MEMKIT_INSTANCE", Path.cwd() / "instance"))
ENV_PREFIX = "MEMKIT_"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    database_url: str = f"sqlite:///{INSTANCE / 'memkit.db'}"
    secret_key: str = ""  # HMAC key for codes; generated once into instance/secret_key if empty
    token_ttl_hours: PositiveFloat = 24.0 * 7
    code_ttl_minutes: PositiveFloat = 10.0
    code_max_attempts: PositiveInt = 5  # checks of one code (right or wrong); then it is burned
    # Checks of all codes of one account and mode in the last hour.
    code_checks_per_hour: PositiveInt = 20
    # A sign-up nobody validated in this time is deleted; its address is free again.
    signup_ttl_hours: PositiveFloat = 24.0
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
    rate_limit_check_code: str = "10 per minute;60 per hour"  # validate, reset, change mobile
    # Failed credentials only (server/api/limits.py FailedCredentials): a wrong password given
    # with a token (change password, delete account, ask for a change-of-address code) per user;
    # a wrong application secret per application id.
    rate_limit_password: str = "10 per minute;30 per hour"
    rate_limit_app_secret: str = "20 per minute"
    rate_limit_address_factor: int = 5
    # Writes (posts, batches, edits): kilobytes of request bodies per user (per client network:
    # times rate_limit_address_factor). A megabyte of posts is tens of core-seconds of encoding.
    rate_limit_write: str = "2000 per minute;20000 per hour"
    # Questions (POST /agent/memory/query) per user (per client network: times
    # rate_limit_address_factor); and how many of one user's may be answered at once in a
    # process (0: no bound). Past either, 429 with Retry-After. A benchmark asking as a few
    # users sets "1000000000 per minute" and 0.
    rate_limit_query: str = "60 per minute;1000 per hour"
    queries_in_flight: Annotated[int, Field(ge=0)] = 2
    # Seconds before a refused application-secret request's 429 (server/api/limits.py
    # RefuseUnchecked), an account operation's refusal and a code request's answer (Tarpit):
    # `memkit serve`, a thread per connection, sets 1; keep 0 under a pool of threads
    # (gunicorn), where a waiting answer would hold a thread.
    refused_delay: float = 0.0
    # Where the limits count: memory:// (this process), or a store every process shares that
    # keeps a moving window (redis://, mongodb://; not memcached://): the limits count the
    # last minute and hour, never 2N across the edge of a window opened by a first hit.
    rate_limit_storage: str = "memory://"
    max_body_bytes: int = 1_000_000
    # The most an account operation's body (/auth-service/...: sign-up, sign-in, codes) may
    # have: its longest fields (an address of 254 characters, a password of 256, a name of
    # 200) fit many times over; a larger one is a 413 before anything reads it.
    auth_body_bytes: Annotated[int, Field(ge=1024)] = 16_000
    # How many proxies in front of the service (nginx: docs/DEPLOYMENT.md) set X-Forwarded-For,
    # -Proto and -Host: the client address the limits count is the one the first of them saw
    # (the n-th from the right of X-Forwarded-For). 0: the headers are ignored, so that no
    # client can name its own address.
    trusted_proxies: Annotated[int, Field(ge=0)] = 0
    # Where the search index is saved after a build and loaded at start; empty: rebuilt.
    index_dir: str = ""
    # Build (or load) the search index when the app starts, not on the first query.
    warm_index: bool = False
    # The in-memory index applies every floor's changes this often (0: only on demand).
    catch_up_seconds: Annotated[float, Field(ge=0)] = 1.0
    # How long a query waits for other users' writes to its floors to be indexed (its own, it
    # always waits for); with catch_up_seconds = 0 nothing applies them in the background, so
    # a query applies them itself, however long that takes.
    others_writes_wait: Annotated[float, Field(ge=0)] = 1.0
    # The TOML the query endpoint serves; empty: memkit/config/default.toml (postgres.toml
    # with search_backend = "postgres").
    pipeline_config: str = ""
    # "memory": each process holds its own index, caught up from the store's log
    # (server/search/index.py); "postgres": the index lives in PostgreSQL (pgvector,
    # full-text), nothing per process (server/search/store.py); needs a PostgreSQL
    # database_url and a config of pgvector/pgtext retrievers.
    search_backend: Literal["memory", "postgres"] = "memory"

    @model_validator(mode="after")
    def _postgres_needs_postgres(self) -> "Settings":
        if self.search_backend == "postgres" and not self.database_url.startswith(
            ("postgresql://", "postgresql+")
        ):
            raise ValueError(
                "search_backend = 'postgres' (MEMKIT_SEARCH_BACKEND) keeps the search index in "
                "the store and needs a PostgreSQL database_url "
                f"(MEMKIT_DATABASE_URL=postgresql://...), not {self.database_url.split(':', 1)[0]}"
            )
        return self

    @model_validator(mode="after")
    def _limits_keep_a_moving_window(self) -> "Settings":
        scheme = self.rate_limit_storage.split("://", 1)[0]
        if scheme.startswith("memcached") or "://" not in self.rate_limit_storage:
            raise ValueError(
                "rate_limit_storage (MEMKIT_RATE_LIMIT_STORAGE) must be a storage URI that keeps "
                "a moving window: memory://, redis://..., mongodb://..., not "
                f"{self.rate_limit_storage!r}"
            )
        return self

    @classmethod
    def load(cls, overrides: dict | None = None) -> "Settings":
        """The settings: ``overrides`` over ``MEMKIT_*`` variables over the defaults, with
        the instance's secret key when none is set. A bad value is a ValueError naming the
        key (or the variable) and what was expected."""
        overrides = dict(overrides or {})
        try:
            settings = cls(**overrides)
        except PydanticError as exc:
            raise ValueError(_explain(exc.errors()[0], overrides)) from None
        if not settings.secret_key:
            settings.secret_key = _instance_secret()
        return settings

    def as_dict(self) -> dict[str, Any]:
        """Every setting by name: ``Settings.load(s.as_dict())`` is the same settings
        (what a process started by another, e.g. a backfill job, is given)."""
        return self.model_dump()


EXPECTED = {  # pydantic's error kinds in the words of the environment a setting comes from
    "float_parsing": "expected a number",
    "float_type": "expected a number",
    "int_parsing": "expected a whole number",
    "int_type": "expected a whole number",
    "int_from_float": "expected a whole number",
    "bool_parsing": "expected true or false (or 1 or 0)",
    "bool_type": "expected true or false (or 1 or 0)",
    "string_type": "expected a string",
    "greater_than": "expected a positive number",
    "greater_than_equal": "expected a number not below 0",
}


def _explain(error: dict, overrides: dict) -> str:
    """The first error as ``NAME: expected ..., got ...``: the name is the key given to
    ``create_app`` if it was one, else the environment variable it came from."""
    if not error["loc"]:  # a check across settings (the model validator): its own words
        return str(error.get("ctx", {}).get("error", error["msg"]))
    name = str(error["loc"][0])
    where = name if name in overrides else f"{ENV_PREFIX}{name.upper()}"
    if error["type"] == "extra_forbidden":
        return f"{where}: unknown setting (expected one of {', '.join(Settings.model_fields)})"
    if error["type"] == "literal_error":
        expected = f"expected {error['ctx']['expected']}"
    else:
        expected = EXPECTED.get(error["type"], error["msg"])
    return f"{where}: {expected}, got {error.get('input')!r}"


def _instance_secret() -> str:
    path = INSTANCE / "secret_key"
    if not path.exists():
        private_dir(INSTANCE)
        write_private(path, secrets.token_hex(32))
    return path.read_text().strip()
