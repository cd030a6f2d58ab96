"""The service's settings (server/settings.py): one typed model read from the environment
and from the dict given to ``create_app``."""

import pytest

from server.settings import Settings


def test_a_variable_sets_a_setting_and_a_given_key_wins_over_it(monkeypatch):
    monkeypatch.setenv("MEMKIT_FLOOR_QUOTA", "7")
    monkeypatch.setenv("MEMKIT_WARM_INDEX", "true")
    settings = Settings.load({"secret_key": "k"})
    assert settings.floor_quota == 7 and settings.warm_index is True
    assert Settings.load({"secret_key": "k", "floor_quota": 2}).floor_quota == 2


@pytest.mark.parametrize(
    "variable, text, message",
    [
        ("MEMKIT_CODE_MAX_ATTEMPTS", "five", "MEMKIT_CODE_MAX_ATTEMPTS: expected a whole number"),
        ("MEMKIT_CODE_TTL_MINUTES", "0", "MEMKIT_CODE_TTL_MINUTES: expected a positive number"),
        ("MEMKIT_WARM_INDEX", "maybe", "MEMKIT_WARM_INDEX: expected true or false"),
        ("MEMKIT_SEARCH_BACKEND", "elastic", "MEMKIT_SEARCH_BACKEND: expected 'memory' or"),
    ],
)
def test_a_bad_variable_is_named_with_what_was_expected(monkeypatch, variable, text, message):
    monkeypatch.setenv(variable, text)
    with pytest.raises(ValueError, match=message):
        Settings.load({"secret_key": "k"})


def test_a_bad_or_unknown_key_is_named_as_given():
    with pytest.raises(ValueError, match="signup_ttl_hours: expected a positive number, got -1"):
        Settings.load({"secret_key": "k", "signup_ttl_hours": -1})
    with pytest.raises(ValueError, match="floor_qouta: unknown setting .expected one of database"):
        Settings.load({"secret_key": "k", "floor_qouta": 3})


def test_the_postgres_backend_needs_a_postgres_store():
    with pytest.raises(ValueError, match="needs a PostgreSQL database_url"):
        Settings.load({"secret_key": "k", "search_backend": "postgres"})


def test_the_settings_as_a_dict_load_the_same_settings():
    settings = Settings.load({"secret_key": "k", "catch_up_seconds": 0, "index_dir": "/x"})
    assert Settings.load(settings.as_dict()) == settings


@pytest.mark.parametrize("uri", ["memcached://localhost:11211", "redis"])
def test_the_limits_store_must_keep_a_moving_window(uri):
    with pytest.raises(ValueError, match="rate_limit_storage .* moving window"):
        Settings.load({"secret_key": "k", "rate_limit_storage": uri})
    assert Settings.load({"secret_key": "k", "rate_limit_storage": "redis://h:6379"})
