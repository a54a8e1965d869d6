"""The RL-only baseline (DESIGN.md strategy table): the weight stage every round under the frozen
harness H0::

    for t in rounds:
        W[t+1], T[t] = train(W[t], H0, D_train)
"""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.wiring import add_rounds, meta_graph
from coevo.nodes.train import train


def build() -> StateGraph:
    """The RL-only wiring (uncompiled)."""
    builder = meta_graph()
    builder.add_node("train", train)
    # W[t+1], T[t] = train(W[t], H0, D_train)
    builder.add_edge("setup", "train")
    # for t in rounds
    add_rounds(builder, first="train", last="train")
    return builder


graph = build().compile(name="rl_only")
