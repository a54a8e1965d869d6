"""The RL-only baseline (docs/design.md, Strategies): the weight stage every round under the frozen
harness H0::

    for t in rounds:
        W[t+1], T[t] = train(W[t], H0, D_train)
        val(W[t], H0), val(W[t+1], H0)                 # stage_effect: the stage's own effect
"""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.vace.vace import stage_effect
from coevo.nodes.loop import add_rounds, meta_graph, train


def build() -> StateGraph:
    """The RL-only wiring (uncompiled)."""
    builder = meta_graph()
    builder.add_node("train", train)
    builder.add_node("stage_effect", stage_effect)
    # W[t+1], T[t] = train(W[t], H0, D_train)
    builder.add_edge("setup", "train")
    builder.add_edge("train", "stage_effect")
    # for t in rounds
    add_rounds(builder, first="train", last="stage_effect")
    return builder


graph = build().compile(name="rl_only")
