"""Conversation turns keep what the next question may refer to: the posts the
answer quoted, the question's and the quoted sentences' content words, the days the turn
was about and its topic (memkit.question.conversation.Turn). Rows of earlier versions get nothing:
their questions still carry their words, read from ``query``.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

COLUMNS = [
    sa.Column("quoted", sa.JSON),
    sa.Column("words", sa.JSON),
    sa.Column("answer_words", sa.JSON),
    sa.Column("window_from", sa.Date),
    sa.Column("window_to", sa.Date),
    sa.Column("topic", sa.Integer),
]


def upgrade() -> None:
    have = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("conversation_turns")}
    with op.batch_alter_table("conversation_turns") as batch:
        for column in COLUMNS:
            if column.name not in have:
                batch.add_column(column.copy())


def downgrade() -> None:
    with op.batch_alter_table("conversation_turns") as batch:
        for column in COLUMNS:
            batch.drop_column(column.name)
