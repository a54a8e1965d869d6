"""What of a verifier's verdict may reach meta roles (curator, editor, voters, profiler).

``Score.detail`` keys written by coevo's suites:

- ``expected``: the gold answer (or the walkthrough / ground-truth calls). SECRET.
- ``got``: what the agent answered (or the calls it made).
- ``error``: the checker's message; it may quote the gold answer. SECRET.
- ``public``: a dict of diagnostics that never contain the gold answer (family, category, the
  checker's error *type*, won/score/moves, whether the verifier raised).

Rules (docs/design.md, Principles: "Validation and test splits are sealed"; docs/concepts/sealing.md): no gold answer
reaches a meta role in a verdict. A train task's detail reaches meta roles without its secret keys
(what the agent answered, the public diagnostics and anything else the suite wrote); a val/test
task's detail is cut to ``public`` only. A gold answer reaches a role only where the role builds a
demonstration from it (the offline editor, ``coevo.roles.editor``), and the loop then keeps that
task out of later weight stages, checks and search scoring (``coevo.meta.sealing``).
``redact_for_meta`` is the one function callers use before anything reaches a meta role.
"""

from __future__ import annotations

from typing import Any

from coevo.envs.base import Score, Task

PUBLIC_KEY = "public"
SECRET_KEYS = ("expected", "error")


def redact_detail(split: str, detail: dict[str, Any]) -> dict[str, Any]:
    """``detail`` as meta roles may see it for a task of ``split`` (see module doc)."""
    if split == "train":
        return {k: v for k, v in detail.items() if k not in SECRET_KEYS}
    return {PUBLIC_KEY: dict(detail.get(PUBLIC_KEY) or {}), "redacted": True}


def redact_for_meta(task: Task, score: Score) -> Score:
    """The ``score`` of ``task`` with ``detail`` redacted for meta roles (train without its secret
    keys, val/test cut to the ``public`` diagnostics). Reward and passed are kept."""
    return Score(reward=score.reward, passed=score.passed, detail=redact_detail(task.split, score.detail))


def redact_trajectory_detail(trajectory: Any) -> Any:
    """A copy of a ``Trajectory`` whose ``score_detail`` is redacted for its ``split``."""
    return trajectory.model_copy(update={"score_detail": redact_detail(trajectory.split, trajectory.score_detail)})
