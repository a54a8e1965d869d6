"""What of a verifier's verdict may reach meta roles (curator, editor, voters, profiler).

``Score.detail`` keys written by coevo's suites:

- ``expected``: the gold answer (or the walkthrough / ground-truth calls). SECRET.
- ``got``: what the agent answered (or the calls it made).
- ``error``: the checker's message; it may quote the gold answer. SECRET.
- ``public``: a dict of diagnostics that never contain the gold answer (family, category, the
  checker's error *type*, won/score/moves, whether the verifier raised).

Rules (docs/design.md, Principles: "Validation and test splits are sealed"; docs/concepts/sealing.md): no gold answer
reaches a meta role in a verdict. What a meta role may read is an allow-list (``META_KEYS``), never
a list of what to strip, so a user env's diagnostics that carry the gold under a key of their own
(``solution``, ``target``, ...) never reach a curator: a train task's detail is cut to what the agent
answered (``got``), the checker's error type (``error_type``) and the ``public`` diagnostics, plus
``answer_kind``, the kind of answer the task expects (``number``, ``text`` or ``structured``, read from
the gold without any of its content: what tells an editor a number-reading parser may help); a val/test
task's detail is cut to ``public`` only.
A gold answer reaches a role only where the role builds a demonstration from it (the offline editor,
``coevo.roles.editor``), and the loop then keeps that task out of later weight stages, checks and
search scoring (``coevo.meta.sealing``).
``redact_for_meta`` is the one function callers use before anything reaches a meta role.
"""

from __future__ import annotations

import re
from typing import Any

from coevo.envs.base import Score, Task

PUBLIC_KEY = "public"
SECRET_KEYS = ("expected", "error")
"""The keys of coevo's own suites that hold or may quote the gold answer (never in ``META_KEYS``)."""
META_KEYS = ("got", "error_type", PUBLIC_KEY)
"""The only keys of a train task's ``Score.detail`` a meta role reads (module doc): what the agent
answered, the checker's error type (a label such as ``wrong_func_name``, never its message, which may
quote the gold) and the public diagnostics."""
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def answer_kind(expected: Any) -> str:
    """The kind of a gold answer without its content: ``number`` (an integer or decimal, as text or a
    number), ``text`` (any other string) or ``structured`` (a list, dict, ...)."""
    if isinstance(expected, bool):
        return "structured"
    if isinstance(expected, (int, float)) or (isinstance(expected, str) and _NUMBER.fullmatch(expected.strip())):
        return "number"
    return "text" if isinstance(expected, str) else "structured"


def redact_detail(split: str, detail: dict[str, Any]) -> dict[str, Any]:
    """``detail`` as meta roles may see it for a task of ``split`` (module doc): a train task's ``META_KEYS``
    (``public`` copied) and ``answer_kind`` when the detail has an ``expected`` answer; a val/test task's
    ``public`` only, marked ``redacted``. Nothing else of ``detail`` is kept, whatever its key."""
    if split == "train":
        out = {k: detail[k] for k in META_KEYS if k in detail}
        if isinstance(out.get(PUBLIC_KEY), dict):
            out[PUBLIC_KEY] = dict(out[PUBLIC_KEY])
        if detail.get("expected") not in (None, ""):
            out["answer_kind"] = answer_kind(detail["expected"])
        return out
    return {PUBLIC_KEY: dict(detail.get(PUBLIC_KEY) or {}), "redacted": True}


def redact_for_meta(task: Task, score: Score) -> Score:
    """The ``score`` of ``task`` with ``detail`` redacted for meta roles (train without its secret
    keys, val/test cut to the ``public`` diagnostics). Reward and passed are kept."""
    return Score(reward=score.reward, passed=score.passed, detail=redact_detail(task.split, score.detail))


def redact_trajectory_detail(trajectory: Any) -> Any:
    """A copy of a ``Trajectory`` whose ``score_detail`` is redacted for its ``split``."""
    return trajectory.model_copy(update={"score_detail": redact_detail(trajectory.split, trajectory.score_detail)})
