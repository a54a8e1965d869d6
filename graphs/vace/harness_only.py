"""The harness-only baseline (docs/design.md, Strategies): VACE's refinement and gate with frozen
weights W0; the trajectories T[t] come from evaluating H[t] on train (``sample``)::

    for t in rounds:
        T[t]   = sample(W0, H[t], D_train)
        H'[t]  = refine(H[t], T[t])
        b, c   = validate(W0, H[t]), validate(W0, H'[t])
        H[t+1] = H'[t] if gate(b, c) else H[t]
"""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.nodes.loop import add_rounds, gate, meta_graph, sample, validate
from coevo.nodes.refine import add_refinement


def build() -> StateGraph:
    """The harness-only wiring (uncompiled)."""
    builder = meta_graph()
    builder.add_node("sample", sample)
    builder.add_node("validate", validate)
    builder.add_node("gate", gate)
    # T[t] = sample(W0, H[t], D_train)
    builder.add_edge("setup", "sample")
    # H'[t] = refine(H[t], T[t])
    refined = add_refinement(builder, after="sample")
    # b, c = validate(W0, H[t]), validate(W0, H'[t])
    builder.add_edge(refined, "validate")
    # H[t+1] = H'[t] if gate(b, c) else H[t]
    builder.add_edge("validate", "gate")
    # for t in rounds
    add_rounds(builder, first="sample", last="gate")
    return builder


graph = build().compile(name="harness_only")
