"""coevo.storage: the SQLModel archive of the persisted domain models (``coevo.records``; DESIGN.md,
Storage). The only package that touches SQL."""

from coevo.storage.archive import Archive
from coevo.storage.errors import ArchiveError, SchemaVersionError
from coevo.storage.tables import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "Archive", "ArchiveError", "SchemaVersionError"]
