"""The ``run_heartbeats`` table: which process runs each run, and when it last said so (``coevo.app.heartbeat``).

A table of its own (``storage/README.md``: prefer a new table to a new column), so a beat never
rewrites the run's row or its ``updated_at``; migration ``0004``.
"""

from __future__ import annotations

from sqlmodel import Field, SQLModel

from coevo.storage.tables import _created
from coevo.timestamps import UTCTime


class HeartbeatRecord(SQLModel):
    """The process running run ``id`` (a meta-loop run or a ``coevo eval``): its ``host`` and ``pid``,
    and ``at`` the last time it said it was alive (UTC; rewritten every few seconds while it runs,
    ``coevo.app.heartbeat``), so a run left ``running`` by a killed process can be told from a live one."""

    id: str = Field(primary_key=True)
    host: str = ""
    pid: int = 0
    at: UTCTime = _created()


class HeartbeatRow(HeartbeatRecord, table=True):
    """The ``run_heartbeats`` table: one row per run that has beaten (a table of its own, so a beat
    never rewrites the run's row or its ``updated_at``)."""

    __tablename__ = "run_heartbeats"
