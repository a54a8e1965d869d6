"""One finished phase of an alternating run (WHALE §4, FST, stagewise; PACE's two timescales): the model
the phase nodes return in the meta state and the archive stores (``phases``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from coevo.records.fields import created, new_id
from coevo.timestamps import UTCTime


class Phase(BaseModel):
    """One finished phase of a run: its ``index`` in the run (the key budgets are attributed by),
    ``cycle``, ``kind`` (``weights``, ``harness``, or PACE's ``prompt``/``control``), ``length`` in
    ``unit`` (epochs, iterations), ``steps``, the harness and checkpoint it ended with, its training
    signal per step/iteration (``signal``: RSFT reward per step, or the best train score after each
    iteration), the fields it could edit (None: any), ``stop_reason`` (why it ended) and when it ran
    (``started_at``/``ended_at``, UTC: the window in which the run's evaluations, trajectories and
    LLM calls belong to it). ``id``: ``<run id>-phase<index>`` once the run records it."""

    id: str = Field(default_factory=new_id)
    run_id: str | None = None
    index: int
    cycle: int
    kind: Literal["weights", "harness", "prompt", "control"]
    length: float
    unit: Literal["epochs", "iterations"]
    steps: int = 0
    harness_id: str
    checkpoint: str
    signal: list[float] = Field(default_factory=list)
    fields: list[str] | None = None
    stop_reason: str = ""
    started_at: UTCTime | None = None
    ended_at: UTCTime | None = None
    created_at: UTCTime = created()
