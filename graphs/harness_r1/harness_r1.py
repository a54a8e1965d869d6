"""Harness-R1 ("Learning to Edit Executable Runtime Harnesses from Agent Failure Trajectories",
arXiv:2608.02276) co-evolved with the target, as a LangGraph graph: the paper trains a harness engineer on the
outcomes of its own edits and "points toward co-evolving the harness engineer and the target agent"; here each
round alternates the two::

    for t in rounds:
        W[t+1], T[t] = train(W[t], H[t], D_train)               # the target's weight stage
        E[t+1]       = train_engineer(E[t], H[t], T[t], W[t+1]) # SFT (first round, accepted edits), GRPO
        H'[t]        = refine(H[t], T[t]; editor = E[t+1])      # curate -> edit -> check
        b, c         = validate(W[t+1], H[t]), validate(W[t+1], H'[t])
        H[t+1]       = H'[t] if gate(b, c) else H[t]            # gate
"""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.harness_r1.nodes import train_engineer
from coevo.graphs.harness_r1.state import HarnessR1State
from coevo.nodes.loop import add_rounds, gate, meta_graph, train, validate
from coevo.nodes.refine import add_refinement


def build() -> StateGraph:
    """Harness-R1's wiring (uncompiled)."""
    builder = meta_graph(state=HarnessR1State)
    builder.add_node("train", train)
    builder.add_node("train_engineer", train_engineer)
    builder.add_node("validate", validate)
    builder.add_node("gate", gate)
    # W[t+1], T[t] = train(W[t], H[t], D_train)
    builder.add_edge("setup", "train")
    # E[t+1] = train_engineer(E[t], H[t], T[t], W[t+1])
    builder.add_edge("train", "train_engineer")
    # H'[t] = refine(H[t], T[t]) by the engineer
    refined = add_refinement(builder, after="train_engineer")
    # b, c = validate(W[t+1], H[t]), validate(W[t+1], H'[t])
    builder.add_edge(refined, "validate")
    # H[t+1] = H'[t] if gate(b, c) else H[t]
    builder.add_edge("validate", "gate")
    # for t in rounds
    add_rounds(builder, first="train", last="gate")
    return builder


graph = build().compile(name="harness_r1")
