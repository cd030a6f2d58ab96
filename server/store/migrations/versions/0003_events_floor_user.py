"""An index on events (floor_id, user_id): every query names its floors' authors (the
people a question may be about, server/services/memory.py ``floor_authors``), and without
it SQLite read every event row of those floors to find them (1.5 ms a query at 500
posts a floor; more as floors grow). With it the lookup reads the index alone.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    have = {i["name"] for i in sa.inspect(op.get_bind()).get_indexes("events")}
    if "events_floor_user" not in have:
        op.create_index("events_floor_user", "events", ["floor_id", "user_id"])


def downgrade() -> None:
    op.drop_index("events_floor_user", table_name="events")
