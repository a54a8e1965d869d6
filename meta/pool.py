"""Harness-S's models that travel in the meta state: candidate briefs (Eq. 2) here, and the persisted
ones, the sibling pool (Eq. 4), behaviour profiles (Eq. 8, 11) and router ballots (Eq. 9), from
``coevo.records.harness_s`` (re-exported).

Plain pydantic models with no dependency on the rest of the meta state, so ``coevo.meta.state``
holds them as fields and lists them in ``STATE_MODELS`` (the checkpointer's allow-list).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from coevo.records.harness_s import Ballot, PoolMember, Profile, ProfileEntry

__all__ = ["Ballot", "Brief", "PoolMember", "Profile", "ProfileEntry"]


class Brief(BaseModel):
    """One candidate's brief in a directional-evolution round (Harness-S Eq. 2, Table 8): the parent
    it edits, the merged direction it targets (``direction``: a ``Direction`` id in the state's
    ``directions``, made of 2-3 related causes, each with >= 2 distinct failed train tasks), the
    causes, and the parent's train trajectory ids it was curated from."""

    id: str
    parent: str
    direction: str
    causes: list[str]
    trajectories: list[str] = Field(default_factory=list)
