"""Alembic's entry point. Migrations run on the connection that server/store/migrate.py
gives, inside its transaction (which holds the store's lock), so it commits them."""

from alembic import context

from server.store.schema import metadata

context.configure(connection=context.config.attributes["connection"], target_metadata=metadata)
context.run_migrations()
