"""One ``coevo export``: which pair of which run went into which agent folder, and when."""

from __future__ import annotations

from pydantic import BaseModel

from coevo.records.fields import created
from coevo.timestamps import UTCTime


class ExportRecord(BaseModel):
    """An agent folder written by ``coevo export`` (``coevo.app.export``): ``id`` the folder's export
    id (its ``agent.json`` carries it, so a folder found anywhere is traced back to this row), the
    ``run_id`` and the pair exported (``harness_id``, ``checkpoint_id``), ``kind`` what the folder
    holds (``harness``: a harness spec; ``agent``: a user agent's params and factory; ``routed``: a
    Harness-S pool and router), ``path`` the folder written (absolute; ``DIR/vN`` for a version),
    ``version`` N for a versioned export (None: a plain folder), and the time it was written (UTC)."""

    id: str
    run_id: str | None = None
    harness_id: str
    checkpoint_id: str
    kind: str = "harness"
    path: str
    version: int | None = None
    created_at: UTCTime = created()
