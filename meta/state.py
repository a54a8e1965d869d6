"""Typed state of the meta-loop graphs and the records that travel in it.

``MetaState`` fields are either *replaced* by the node that writes them (round, incumbent,
checkpoint, train trajectories, directions, validation) or *accumulated* across the run with a
reducer (decisions, history). ``candidates`` collects the parallel ``edit`` branches of one
round (fan-in) and is cleared by ``curate`` at the start of each refinement.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from pydantic import BaseModel, Field

RESET = "__reset__"


def collect(current: list[dict] | None, update: list[dict] | str) -> list[dict]:
    """Reducer for ``candidates``: append branch results; the string ``RESET`` empties the list."""
    if update == RESET:
        return []
    return list(current or []) + list(update)


class Direction(BaseModel):
    """A repair direction (Harness-S §3.2): one root cause supported by ≥ 2 failed train tasks,
    with the evidence (task ids and trajectory excerpts; train data only)."""

    id: str
    cause: str
    description: str
    task_ids: list[str]
    evidence: list[dict[str, Any]] = Field(default_factory=list)


class Candidate(BaseModel):
    """An edit of the incumbent proposed for a direction.

    ``status``: ``proposed`` → ``checked`` | ``rejected``; ``reason`` says why a candidate was
    rejected (malformed LLM reply, invalid patch, failed static or local check). ``spec_id`` is
    the child spec's id once the patch applied. ``checks`` holds the smoke/local check numbers.
    """

    id: str
    direction: str
    parent_id: str
    patch: list[dict[str, Any]] = Field(default_factory=list)
    rationale: str = ""
    spec_id: str | None = None
    status: str = "proposed"
    reason: str = ""
    revision: int = 0
    checks: dict[str, Any] = Field(default_factory=dict)


class MetaState(TypedDict, total=False):
    """State of one meta-loop run (VACE Algorithm 1)."""

    run_id: str
    """Replaced once by ``setup``."""
    round: int
    """Replaced: the round being run, 0-based."""
    incumbent: str
    """Replaced: the incumbent harness id H[t]."""
    start_harness: str
    start_checkpoint: str
    checkpoint: str
    """Replaced: the current checkpoint id W[t] (W[t+1] after ``train``)."""
    train_trajectories: list[str]
    """Replaced each round: ids of the trajectories T[t] the weight stage (or sampling) produced."""
    directions: list[dict]
    """Replaced each round: ``Direction`` dicts from ``curate``."""
    candidates: Annotated[list[dict], collect]
    """Fan-in of the ``edit`` branches (``Candidate`` dicts); reset by ``curate``."""
    checked: list[dict]
    """Replaced each round: the candidates after ``check`` (status ``checked`` or ``rejected``)."""
    validation: dict
    """Replaced each round: val results per harness id (score, per-task rewards)."""
    decisions: Annotated[list[dict], operator.add]
    """Accumulated: every gate decision of the run."""
    history: Annotated[list[dict], operator.add]
    """Accumulated: one summary per round (scores, accepted candidate)."""
    test: dict
    """Replaced by ``final_test``: test scores of the start pair and the final pair."""
