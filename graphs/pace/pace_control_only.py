"""PACE's control-only single-mode baseline (PACE abstract: "the stronger single-mode evolution
baseline"; its tau-bench case study compares prompt-only evolution): PACE's search, val gate and
patience rule with the control-logic timescale alone, every edit confined to ``CONTROL_FIELDS``
(hooks, parser, budget, tool view, context), and no prompt phase::

    phase = control                                        # plan
    A = {H}; loop: C = propose(A); b, c = validate(W0, H), validate(W0, C); H = gate(b, c)
    until no validated gain for pace.patience iterations (or rounds iterations)

Weights frozen, as in PACE; it differs from ``pace`` only in its plan (``plan_for("control")``).
"""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.pace.nodes import control_only_plan
from coevo.graphs.pace.pace import wire


def build() -> StateGraph:
    """The control-only wiring (uncompiled): PACE's, with one timescale."""
    return wire(control_only_plan)


graph = build().compile(name="pace_control_only")
