"""Harness-S's models that travel in the meta state: the sibling pool (Eq. 4), candidate briefs
(Eq. 2), behaviour profiles (Eq. 8, 11) and router ballots (Eq. 9).

Plain pydantic models with no dependency on the rest of the meta state, so ``coevo.meta.state``
holds them as fields and lists them in ``STATE_MODELS`` (the checkpointer's allow-list).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


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


class PoolMember(BaseModel):
    """A sibling in the pool H_g (Eq. 4): an executable, protocol-compliant child (or H0, ``round``
    -1), with its lineage (``parent``), the direction and causes it targets, the evolution round
    that made it, its validation score under the frozen policy, the val tasks it solved (V(H) in
    Eq. 3), and whether Eq. 3 chose it as a parent of the next round."""

    harness_id: str
    parent: str | None = None
    round: int = -1
    direction: str = ""
    causes: list[str] = Field(default_factory=list)
    val_score: float | None = None
    solved: list[str] = Field(default_factory=list)
    selected: bool = False


class ProfileEntry(BaseModel):
    """One behaviour-profile entry e = {When: w, Behavior: b} (Harness-S Eq. 8): the task condition
    ``when`` and the sibling's behaviour relative to H0 under it."""

    when: str
    behavior: str


class Profile(BaseModel):
    """P_i^(s) = Profile(E_i^(s), E_0^(s)) (Harness-S Eq. 11): a sibling's prefer/avoid entries from
    paired *validation* runs against H0 at checkpoint ``checkpoint_id`` (same tasks, seeds, limits),
    with the numbers the router reads: ``val_success`` (fraction of val tasks passed), ``per_task``
    (val task id -> 1.0 passed / 0.0 failed) and ``categories`` (category -> [n tasks, sibling
    passes, H0 passes]). ``source``: ``offline`` or the LLM profiler's model; ``reason`` why an LLM
    reply was ignored (empty when none was)."""

    harness_id: str
    checkpoint_id: str
    prefer: list[ProfileEntry] = Field(default_factory=list)
    avoid: list[ProfileEntry] = Field(default_factory=list)
    val_success: float = 0.0
    per_task: dict[str, float] = Field(default_factory=dict)
    categories: dict[str, list[int]] = Field(default_factory=dict)
    source: str = "offline"
    reason: str = ""


class Ballot(BaseModel):
    """One voter's ranked ballot for one task (Harness-S Eq. 9): harness ids best first (at most the
    ballot length), or none with the ``reason`` the reply was ignored."""

    voter: str
    task_id: str
    ranking: list[str] = Field(default_factory=list)
    reason: str = ""
    kind: Literal["rule", "llm"] = "rule"
