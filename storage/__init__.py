"""coevo.storage: the SQLModel archive of the persisted domain models (``coevo.records``; docs/design.md,
Storage). The only package that touches SQL."""

from coevo.storage.archive import Archive
from coevo.storage.errors import AmbiguousIdError, ArchiveError, ArchiveFullError, SchemaVersionError
from coevo.storage.tables import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "AmbiguousIdError", "Archive", "ArchiveError", "ArchiveFullError", "SchemaVersionError"]
