"""PACE's prompt-only single-mode baseline (PACE abstract: "the stronger single-mode evolution
baseline"; its tau-bench case study compares prompt-only evolution): PACE's search, val gate and
patience rule with the prompt timescale alone, every edit confined to ``PROMPT_FIELDS``
(``/prompt``), and no control phase::

    phase = prompt                                        # plan
    A = {H}; loop: C = propose(A); b, c = validate(W0, H), validate(W0, C); H = gate(b, c)
    until no validated gain for pace.patience iterations (or rounds iterations)

Weights frozen, as in PACE; it differs from ``pace`` only in its plan (``plan_for("prompt")``).
"""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.pace.nodes import prompt_only_plan
from coevo.graphs.pace.pace import wire


def build() -> StateGraph:
    """The prompt-only wiring (uncompiled): PACE's, with one timescale."""
    return wire(prompt_only_plan)


graph = build().compile(name="pace_prompt_only")
