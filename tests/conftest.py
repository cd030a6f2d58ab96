"""Shared fixtures. The embedding model is the real packaged MiniLM; its cache lives in a
per-session temporary folder so tests never depend on what an earlier run left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memkit.config import CONFIG_PATH_ENV
from memkit.datasets import data_root

SHARED = data_root()

# The checkout's experiments (eval/configs) by name from any folder a test runs in (some run
# from a temporary folder, or start a process there), and no other folder's configs.
os.environ[CONFIG_PATH_ENV] = str(Path(__file__).resolve().parents[1] / "eval" / "configs")


@pytest.fixture(scope="session", autouse=True)
def _cache_dir(tmp_path_factory):
    os.environ["MEMKIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("memkit-cache"))
    os.environ.setdefault(
        "XDG_RUNTIME_DIR", str(tmp_path_factory.mktemp("xdg-runtime"))
    )  # for pgserver
    yield


@pytest.fixture(scope="session", autouse=True)
def _cheap_argon2():
    """The service's argon2id at its cheapest parameters (one pass over 8 MiB, one lane) in
    tests: they check when and how often a password is hashed or checked, not what each hash
    costs, and signing up and in is most of many service tests' time at the real parameters
    (argon2-cffi's defaults, 64 MiB; test_accounts checks the service is built with them)."""
    from argon2 import PasswordHasher

    from server.services import accounts

    real = accounts._hasher
    cheapest = PasswordHasher(time_cost=1, memory_cost=8 * 1024, parallelism=1)
    accounts._hasher = accounts._Argon2(cheapest)
    yield
    accounts._hasher = real


def shared_dataset(name: str) -> Path:
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"shared dataset {name} not found at {path} (set MEMKIT_DATA)")
    return path


from tests.service_fixtures import _close_connections, app, open_app  # noqa: E402,F401  (the service app, on SQLite and PostgreSQL; connections closed after each test)
