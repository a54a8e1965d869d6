"""The archive's errors: each message says what to do."""

from coevo.errors import CoevoError


class ArchiveError(CoevoError, RuntimeError):
    """The archive cannot be opened or a lookup failed; the message says what to do."""


class SchemaVersionError(ArchiveError):
    """The database was written by a newer coevo schema than this code understands."""
