"""Alembic's environment for the archive: migrations run on the connection ``coevo.storage.migrate``
passes in ``config.attributes["connection"]``, inside its transaction. Only coevo's tables are
compared (LangGraph's checkpoint tables may share the database)."""

from alembic import context
from sqlmodel import SQLModel

import coevo.storage.tables  # noqa: F401  (registers the archive's tables on SQLModel.metadata)

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    render_as_batch=True,  # SQLite alters a table by copying it
    include_name=lambda name, kind, _parent: kind != "table" or name in SQLModel.metadata.tables,
)
with context.begin_transaction():
    context.run_migrations()
