"""Alembic migrations of the archive (``coevo.storage.migrate`` runs them; see ``storage/README.md``)."""

from alembic import op
from sqlalchemy import inspect


def has_table(name: str) -> bool:
    """Whether table ``name`` exists on the migration's connection: a migration that creates a new table
    creates it only when missing, since ``create_all`` made it in databases opened before the migration
    existed (``storage/README.md``)."""
    return inspect(op.get_bind()).has_table(name)
