"""Alembic migrations of the archive (``coevo.storage.migrate`` runs them; see ``storage/README.md``)."""
