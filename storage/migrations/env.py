"""Alembic's environment for the archive: migrations run on the connection ``coevo.storage.migrate``
passes in ``config.attributes["connection"]``, inside its transaction. Only coevo's tables are
compared (LangGraph's checkpoint tables may share the database)."""

from typing import Any

from alembic import context
from sqlalchemy.types import TypeDecorator
from sqlmodel import SQLModel
from sqlmodel.sql.sqltypes import AutoString

import coevo.storage.tables  # noqa: F401  (registers the archive's tables on SQLModel.metadata)


def render_type(kind: str, obj: Any, _context: Any) -> str | bool:
    """Frozen, coevo-free column types in new migration files: SQLModel's ``AutoString`` as ``sa.String()``,
    a ``TypeDecorator`` (``UTCTimestamp``) as the type it stores (``sa.Float()``)."""
    if kind == "type" and isinstance(obj, AutoString):
        return "sa.String()"
    if kind == "type" and isinstance(obj, TypeDecorator):
        return f"sa.{type(obj.impl_instance).__name__}()"
    return False


connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    render_as_batch=True,  # SQLite alters a table by copying it
    render_item=render_type,
    include_name=lambda name, kind, _parent: kind != "table" or name in SQLModel.metadata.tables,
)
with context.begin_transaction():
    context.run_migrations()
