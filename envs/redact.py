"""What of a verifier's verdict may reach meta roles (curator, editor, voters, profiler).

``Score.detail`` keys written by coevo's suites:

- ``expected``: the gold answer (or the walkthrough / ground-truth calls). SECRET.
- ``got``: what the agent answered (or the calls it made).
- ``error``: the checker's message; it may quote the gold answer. SECRET.
- ``public``: a dict of diagnostics that never contain the gold answer (family, category, the
  checker's error *type*, won/score/moves, whether the verifier raised).

Rules (issue 3, DESIGN.md "Validation and test splits are sealed"): a train task's detail may reach
meta roles whole (the papers' scoring diagnostics, expected vs got); a val/test task's detail is cut
to ``public`` only. ``redact_for_meta`` is the one function callers use before anything reaches a
meta role.
"""

from __future__ import annotations

from typing import Any

from coevo.envs.base import Score, Task

PUBLIC_KEY = "public"
SECRET_KEYS = ("expected", "error")


def redact_detail(split: str, detail: dict[str, Any]) -> dict[str, Any]:
    """``detail`` as meta roles may see it for a task of ``split`` (see module doc)."""
    if split == "train":
        return dict(detail)
    return {PUBLIC_KEY: dict(detail.get(PUBLIC_KEY) or {}), "redacted": True}


def redact_for_meta(task: Task, score: Score) -> Score:
    """The ``score`` of ``task`` with ``detail`` redacted for meta roles (train kept, val/test cut
    to the ``public`` diagnostics). Reward and passed are kept."""
    return Score(reward=score.reward, passed=score.passed, detail=redact_detail(task.split, score.detail))


def redact_trajectory_detail(trajectory: Any) -> Any:
    """A copy of a ``Trajectory`` whose ``score_detail`` is redacted for its ``split``."""
    return trajectory.model_copy(update={"score_detail": redact_detail(trajectory.split, trajectory.score_detail)})
