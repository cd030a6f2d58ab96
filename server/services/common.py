"""Helpers every service uses: the clock and new ids. Kept
apart from the services so none imports another just for these."""

from __future__ import annotations

import secrets
from datetime import datetime, timezone


def now() -> datetime:
    return datetime.now(timezone.utc)


def new_id(prefix: str) -> str:
    """Random text ids (``u_...``, ``f_...``): they reveal nothing about counts."""
    return f"{prefix}_{secrets.token_hex(8)}"
