"""VACE (Algorithm 1 of "Validation-Gated Alternating CoEvolution"; docs/papers.md) as a LangGraph graph::

    for t in rounds:
        W[t+1], T[t] = train(W[t], H[t], D_train)      # train
        val(W[t], H[t]), val(W[t+1], H[t])             # stage_effect: the stage's own effect
        H'[t]        = refine(H[t], T[t])                # curate -> edit (one per direction) -> check
        b, c         = validate(W[t+1], H[t]), validate(W[t+1], H'[t])
        H[t+1]       = H'[t] if gate(b, c) else H[t]     # gate
"""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.vace.nodes import stage_effect
from coevo.graphs.wiring import add_refinement, add_rounds, meta_graph
from coevo.nodes.gate import gate
from coevo.nodes.train import train
from coevo.nodes.validate import validate


def build() -> StateGraph:
    """VACE's wiring of the shared nodes (uncompiled)."""
    builder = meta_graph()
    builder.add_node("train", train)
    builder.add_node("stage_effect", stage_effect)
    builder.add_node("validate", validate)
    builder.add_node("gate", gate)
    # W[t+1], T[t] = train(W[t], H[t], D_train)
    builder.add_edge("setup", "train")
    # the weight stage's own effect: val of H[t] under W[t] and W[t+1] (b below reuses the latter)
    builder.add_edge("train", "stage_effect")
    # H'[t] = refine(H[t], T[t])
    refined = add_refinement(builder, after="stage_effect")
    # b, c = validate(W[t+1], H[t]), validate(W[t+1], H'[t])
    builder.add_edge(refined, "validate")
    # H[t+1] = H'[t] if gate(b, c) else H[t]
    builder.add_edge("validate", "gate")
    # for t in rounds
    add_rounds(builder, first="train", last="gate")
    return builder


graph = build().compile(name="vace")
