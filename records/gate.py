"""VACE's gate verdicts (Algorithm 1): one ``GateDecision`` per validated candidate, with its per-task
``GatePair`` outcomes. The model the gate node returns in the meta state and the archive stores."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from coevo.records.fields import created
from coevo.records.pairing import paired_tasks
from coevo.timestamps import UTCTime


class GatePair(BaseModel):
    """One val task under the incumbent (b) and the candidate (c), same seeds: mean reward and
    whether any rollout passed."""

    task_id: str
    b: float
    c: float
    b_passed: bool
    c_passed: bool

    @classmethod
    def pairs(cls, incumbent: Any, candidate: Any) -> list[GatePair]:
        """The per-task pairs of two evaluations on the same tasks, in the incumbent's task order.
        Each argument has ``per_task``: task id -> an outcome with ``mean_reward`` and ``passed``
        (``coevo.meta.state.EvalSummary``); paired on the tasks both hold (``paired_tasks``: a gate's
        candidate is validated on the incumbent's tasks, so that is every one of them)."""
        b, c = incumbent.per_task, candidate.per_task
        return [cls(task_id=t, b=b[t].mean_reward, c=c[t].mean_reward, b_passed=any(b[t].passed),
                    c_passed=any(c[t].passed)) for t in paired_tasks(b, c)]


class GateDecision(BaseModel):
    """VACE's gate verdict on one candidate in ``round``: incumbent score ``b`` vs candidate score
    ``c`` (mean rewards in [0, 1]), ``accepted`` and why, with the per-task ``pairs``."""

    id: str
    run_id: str | None = None
    round: int = 0
    incumbent_id: str = ""
    candidate_id: str = ""
    b: float = 0.0
    c: float = 0.0
    accepted: bool = False
    reason: str = ""
    pairs: list[GatePair] = Field(default_factory=list)
    created_at: UTCTime = created()
