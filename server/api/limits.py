"""Rate limits in two layers: per account, and per client address (looser).

The first layer counts per account: what the request names (the e-mail address or mobile
number of a sign-in, a code check or a sign-up; the bearer token's user for the changes of
address), so one account's failures cost only that account: another user behind the same
address (an office, a phone network's NAT, an attacker) is not locked out. A request whose
account is unknown (no usable field, a bad token) counts against its address in this layer.
The second layer counts per client address at ``rate_limit_address_factor`` times the
account's limit, bounding one address that tries many accounts. Either answers 429 with
Retry-After. Limits are named after settings: ``rate_limit_<name>`` (per account).
"""

from __future__ import annotations

import re

from flask import current_app, request
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address

from server.errors import ApiError
from server.services.accounts import bearer_token


def looser(limit: str, factor: int) -> str:
    """``"5 per minute;30 per hour"`` times ``factor``: the counts, not the periods."""
    return re.sub(r"(\d+)(\s*(?:per|/))", lambda mo: f"{int(mo.group(1)) * factor}{mo.group(2)}", limit)


def _account(fields) -> str:
    """Who a request is about: the bearer token's user, or the first account field of the body."""
    if fields == "token":
        try:
            token = bearer_token(request.headers.get("Authorization"))
            user = current_app.extensions["memkit"]["accounts"].authenticate(f"Bearer {token}") if token else None
        except ApiError:
            user = None
        if user:
            return f"user:{user}"
    else:
        try:
            data = request.get_json(silent=True) if request.is_json else request.form.to_dict()
        except ApiError:  # a body the strict JSON reader refuses: the request fails with that 400 anyway
            data = None
        for name in fields:
            value = data.get(name) if isinstance(data, dict) else None
            if isinstance(value, str) and value.strip():
                return f"{name}:{value.strip().lower()}"
    return f"address:{get_remote_address()}"


def make_limits(limiter: Limiter, settings):
    """``limits(name, account=fields or "token", only_success=False)``: a decorator applying both layers."""

    def limits(name: str, account, only_success: bool = False):
        value = getattr(settings, f"rate_limit_{name}")
        when = (lambda response: response.status_code == 200) if only_success else None

        def wrap(view):
            per_account = limiter.shared_limit(value, scope=f"{name}/account", key_func=lambda: _account(account),
                                               deduct_when=when)
            per_address = limiter.shared_limit(looser(value, settings.rate_limit_address_factor),
                                               scope=f"{name}/address", deduct_when=when)
            return per_address(per_account(view))

        return wrap

    return limits
