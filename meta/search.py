"""The Meta-Harness search's models and state, shared by the strategies that search harnesses in
phases (WHALE §3.2, §4, with FST and stagewise; PACE's two timescales): a run's phase ``Plan``, each
finished ``Phase`` (``coevo.records``, re-exported), the search archive's ``SearchEntry`` rows and
each iteration's ``SearchIteration``, and ``SearchState``, the core ``MetaState`` plus the keys
``coevo.nodes.search`` reads and writes."""

from __future__ import annotations

import operator
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, Field

from coevo.evaluation.results import PerTask
from coevo.meta.state import MetaState
from coevo.records import Phase


class Plan(BaseModel):
    """The phase plan of an alternating strategy, written once by its ``plan`` node (WHALE §4):
    ``cycles`` of a weight phase of ``weight_epochs`` then a harness phase of ``search_iterations``
    (``adaptive``: the patience rule ends each phase instead, ``coevo.training.schedule.Patience``);
    ``fields``: the JSON Pointer prefixes harness edits may touch (None: any; FST: the prompt)."""

    strategy: str
    cycles: int
    weight_epochs: float
    search_iterations: int
    adaptive: bool = False
    fields: list[str] | None = None


class SearchEntry(BaseModel):
    """One harness of a Meta-Harness search archive (WHALE §3.2): its train ("search split") outcomes
    under the phase's weights, one rollout per task (``per_task``), ``score`` their mean,
    ``model_calls`` (the tie-break: fewer wins), ``order`` of arrival (then older wins), the
    ``iteration`` that proposed it (0: the seed) and the ``patch`` from its ``parent_id``."""

    harness_id: str
    parent_id: str | None = None
    iteration: int = 0
    order: int = 0
    score: float = 0.0
    model_calls: int = 0
    evaluation_id: str = ""
    per_task: PerTask = Field(default_factory=dict)
    patch: list[dict[str, Any]] = Field(default_factory=list)
    rationale: str = ""


class SearchIteration(BaseModel):
    """The end of one harness-search iteration: the ``accepted`` harness (best of the whole archive)
    and its ``score`` (train; PACE: val), the candidates proposed (``candidates``: child ids;
    ``rejected``: why each rejected one was), in ``phase`` (``Phase.index``) of ``cycle``; ``changed``:
    the iteration changed the accepted harness (PACE: a validated gain)."""

    phase: int
    cycle: int
    iteration: int
    accepted: str
    score: float
    changed: bool = False
    candidates: list[str] = Field(default_factory=list)
    rejected: list[str] = Field(default_factory=list)


class SearchState(MetaState, total=False):
    """``MetaState`` plus a Meta-Harness search's phases (WHALE §3.2, §4; PACE's two timescales):
    the keys ``coevo.nodes.search`` reads and writes, shared by the WHALE and PACE families."""

    phase: int
    """Replaced: index of the phase running now (0-based; each phase start advances it)."""
    phase_started: datetime
    """Replaced by the node that starts a phase: when it started (UTC)."""
    fields: list[str] | None
    """Replaced: the fields harness edits may touch in this phase (None: any)."""
    phase_done: bool
    """Replaced by the node that ends a phase: whether the running phase has just ended."""
    iteration: int
    """Replaced: the harness-search iteration within the running phase (0: the archive's seed)."""
    search: list[SearchEntry]
    """Replaced: the running search's archive (seeded by ``search_start``, grown by ``search_evaluate``)."""
    search_iterations: Annotated[list[SearchIteration], operator.add]
    """Accumulated (``operator.add``): every harness-search iteration's accepted harness."""
    phases: Annotated[list[Phase], operator.add]
    """Accumulated (``operator.add``): every finished phase, in order."""
