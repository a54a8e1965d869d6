"""Field helpers shared by the persisted records: a fresh id and a creation time."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import Field

from coevo.timestamps import utcnow


def new_id() -> str:
    """A fresh random id (32 hex digits): the default of records whose id nothing else names."""
    return uuid.uuid4().hex


def created() -> Any:
    """A ``created_at``-style field: a ``coevo.timestamps.UTCTime`` defaulting to now."""
    return Field(default_factory=utcnow)
