"""Fuzzing: schemathesis drives the OpenAPI document against the app.

Every operation gets generated requests (valid and invalid bodies, parameters and
headers). Most of them carry a real bearer token, and most put the ids of a real floor,
block, event and user into the path and body, so the fuzzer gets past authentication and
the 404s into the code behind them. Each response must not be a 5xx, must have a status
the document lists for the operation, must match the document's schema for it, and a
request the document calls invalid must be refused (the checks of
``case.call_and_validate``). One check is left out, that every schema-valid request is
accepted: validity the document cannot express (a deliverable e-mail address, the right
password, a code that was sent) is checked by the service and refused with a 4xx naming
the field. The test prints how many requests each operation got and fails under 1,000. It runs on
a SQLite and on a PostgreSQL store (PostgreSQL refuses some text SQLite takes).
"""

from __future__ import annotations

from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.service_fixtures import make_app, user

EXAMPLES_PER_OPERATION = 60
MIN_REQUESTS = 1000


@pytest.fixture(params=["sqlite", "postgresql"])
def fuzz_app(request, tmp_path, tmp_path_factory):
    # Rate limits off: a 429 is a documented answer, but it would hide the code behind it.
    application = make_app(
        request.param,
        tmp_path,
        tmp_path_factory,
        **{
            f"rate_limit_{name}": "10000 per second"
            for name in ("send_code", "sign_in", "sign_up", "check_code", "change_email")
        },
    )
    yield application
    application.extensions["memkit"]["engine"].dispose()


def real_ids(app) -> tuple[dict, dict]:
    """A signed-in user with a second floor and an event: (auth headers, path ids)."""
    c = app.test_client()
    headers, floor, blocks = user(c, app, "Fuzz")
    event = c.post(
        f"/floors/{floor}/blocks/{blocks['feed']}/events",
        headers=headers,
        json={"text": "the fuzzer's first post about gardening", "tags": ["garden"]},
    ).get_json()
    me = c.get("/auth-service/profile", headers=headers).get_json()
    return headers, {
        "user_id": me["profile"]["user_id"],
        "floor_id": floor,
        "block_id": blocks["feed"],
        "event_id": event["event_id"],
    }


REAL_KEYS = {"reply_to": "event_id", "repost_of": "event_id", "user_id": "user_id"}


def with_real_ids(body, ids: dict):
    """``body`` with every id field that names an event, a user or floors pointed at real ones."""
    if isinstance(body, list):
        return [with_real_ids(item, ids) for item in body]
    if not isinstance(body, dict):
        return body
    out = {k: with_real_ids(v, ids) for k, v in body.items()}
    for key, name in REAL_KEYS.items():
        if isinstance(out.get(key), str):
            out[key] = ids[name]
    if isinstance(out.get("floor_ids"), list):
        out["floor_ids"] = [ids["floor_id"]]
    return out


@pytest.mark.heavy
def test_fuzz_every_operation(fuzz_app):
    headers, ids = real_ids(fuzz_app)
    schema = schemathesis.openapi.from_wsgi("/openapi.json", fuzz_app)
    operations = [result.ok() for result in schema.get_all_operations()]
    sent: Counter = Counter()
    statuses: Counter = Counter()
    failures: dict[str, str] = {}  # kind of failure -> one request that showed it

    for operation in operations:
        # Hypothesis leans to the first choice: three in four requests are signed in.
        @given(
            case=operation.as_strategy(),
            signed_in=st.sampled_from([True, True, True, False]),
            real_path=st.sampled_from([True, True, False]),
        )
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case, signed_in, real_path):
            if real_path and case.path_parameters:
                case.path_parameters = {k: ids.get(k, v) for k, v in case.path_parameters.items()}
            if real_path and isinstance(case.body, (dict, list)):
                case.body = with_real_ids(case.body, ids)
            extra = headers if signed_in else None
            try:
                response = case.call_and_validate(
                    headers=extra, excluded_checks=[positive_data_acceptance]
                )
            except (
                BaseExceptionGroup
            ) as group:  # schemathesis' FailureGroup: collect all, report at the end
                for exc in group.exceptions:
                    kind = (
                        f"{case.operation.label}: {type(exc).__name__}: {str(exc).splitlines()[0]}"
                    )
                    failures.setdefault(
                        kind, f"{case.path_parameters} {case.query} body={case.body!r:.300}\n{exc}"
                    )
                return
            sent[case.operation.label] += 1
            statuses[case.operation.label, response.status_code] += 1

        run()

    print(f"\n{sum(sent.values())} requests over {len(sent)} operations")
    for label, n in sorted(sent.items()):
        got = ", ".join(
            f"{status}: {k}" for (op, status), k in sorted(statuses.items()) if op == label
        )
        print(f"  {n:4d}  {label}  ({got})")
    assert not failures, "\n\n".join(
        f"{kind}\n  e.g. {example}" for kind, example in failures.items()
    )
    assert {op.label for op in operations} == set(sent), "an operation got no request"
    assert sum(sent.values()) >= MIN_REQUESTS
    assert not any(status >= 500 for _, status in statuses)
