"""Harness-S's persisted models: the sibling pool (Eq. 4), behaviour profiles (Eq. 8, 11) and router
ballots (Eq. 9). The same objects travel in the meta state (``coevo.meta.state``) and the router graph,
and the archive stores them (``pool_members``, ``profiles``, ``votes``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from coevo.records.fields import created, new_id
from coevo.timestamps import UTCTime


class PoolMember(BaseModel):
    """A sibling in the pool H_g (Eq. 4): an executable, protocol-compliant child (or H0, ``round``
    -1), with its lineage (``parent``), the direction and causes it targets, the evolution round
    that made it, its validation score under the frozen policy, the val tasks it solved (V(H) in
    Eq. 3), and whether Eq. 3 chose it as a parent of the next round. ``id``: ``<run id>-<harness
    id prefix>`` once the run records it."""

    id: str = Field(default_factory=new_id)
    run_id: str | None = None
    harness_id: str
    parent: str | None = None
    round: int = -1
    direction: str = ""
    causes: list[str] = Field(default_factory=list)
    val_score: float | None = None
    solved: list[str] = Field(default_factory=list)
    selected: bool = False
    created_at: UTCTime = created()


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
    reply was ignored (empty when none was). Archived once per (run, checkpoint, harness) with the
    ``round`` that re-anchored it."""

    id: str = Field(default_factory=new_id)
    run_id: str | None = None
    round: int = 0
    harness_id: str
    checkpoint_id: str
    prefer: list[ProfileEntry] = Field(default_factory=list)
    avoid: list[ProfileEntry] = Field(default_factory=list)
    val_success: float = 0.0
    per_task: dict[str, float] = Field(default_factory=dict)
    categories: dict[str, list[int]] = Field(default_factory=dict)
    source: str = "offline"
    reason: str = ""
    created_at: UTCTime = created()


class Ballot(BaseModel):
    """One voter's ranked ballot for one task (Harness-S Eq. 9): harness ids best first (at most the
    ballot length), or none with the ``reason`` the reply was ignored; ``kind`` of voter (None in
    archives written before it was recorded). The router adds the ``purpose`` of the routing
    (``rescue``, ``rank`` or ``app``) and the checkpoint whose profiles it read; the run archives it
    (``votes``)."""

    id: str = Field(default_factory=new_id)
    run_id: str | None = None
    checkpoint_id: str = ""
    task_id: str
    voter: str
    purpose: str = ""
    ranking: list[str] = Field(default_factory=list)
    reason: str = ""
    kind: Literal["rule", "llm"] | None = "rule"
    created_at: UTCTime = created()
