"""coevo.storage: the SQLModel archive (DESIGN.md, Storage). The only package that touches SQL."""

from coevo.storage.archive import Archive
from coevo.storage.errors import AmbiguousIdError, ArchiveError, ArchiveFullError, SchemaVersionError
from coevo.storage.tables import (
    SCHEMA_VERSION,
    BudgetRecord,
    CheckpointRecord,
    EditRecord,
    EvaluationRecord,
    GateDecisionRecord,
    HarnessRecord,
    LLMCallRecord,
    ProfileRecord,
    RunRecord,
)

__all__ = [
    "SCHEMA_VERSION", "AmbiguousIdError", "Archive", "ArchiveError", "ArchiveFullError", "BudgetRecord",
    "CheckpointRecord", "EditRecord", "EvaluationRecord", "GateDecisionRecord", "HarnessRecord", "LLMCallRecord",
    "ProfileRecord", "RunRecord", "SchemaVersionError",
]
