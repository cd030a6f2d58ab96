"""Tokens are tied to the credentials they were issued on: ``users.credential_version``
counts the account's password and address changes, ``tokens.credential_version`` records
the count a token was issued under, and a token works only while the two agree
(server/services/accounts.py ``authenticate``). A sign-in that checked the old password
while the owner changed it could otherwise insert its token after the change revoked the
others. Existing rows get 0 on both sides, so tokens issued before keep working.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

TABLES = ("users", "tokens")


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    for table in TABLES:
        if "credential_version" not in {c["name"] for c in inspector.get_columns(table)}:
            # ALTER TABLE ... ADD COLUMN, never a copy of the table (see downgrade)
            op.add_column(
                table,
                sa.Column("credential_version", sa.Integer, nullable=False, server_default="0"),
            )


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN, not a batch: SQLite's batch copies the table and drops the
    # old one, and dropping users, with foreign keys on, deletes every row that refers to it.
    for table in TABLES:
        op.drop_column(table, "credential_version")
