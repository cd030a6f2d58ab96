"""Conversation turns keep who wrote the posts the answer quoted: a topic is
about them too, so a question naming someone else starts a topic of its own ("What
happened on the descent?", answered from Diego's post, then "Back to Aisha: what does she
do for work?"). Rows of earlier versions get nothing: their topics are about the people
their questions named, as before.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    have = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("conversation_turns")}
    if "people" not in have:
        with op.batch_alter_table("conversation_turns") as batch:
            batch.add_column(sa.Column("people", sa.JSON))


def downgrade() -> None:
    with op.batch_alter_table("conversation_turns") as batch:
        batch.drop_column("people")
