"""VACE (Algorithm 1 in ``shared/papers/vace_and_related_abstracts.txt``) as a LangGraph graph::

    for t in rounds:
        W[t+1], T[t] = train(W[t], H[t], D_train)      # train
        H'[t]        = refine(H[t], T[t])                # curate -> edit (one per direction) -> check
        b, c         = validate(W[t+1], H[t]), validate(W[t+1], H'[t])
        H[t+1]       = H'[t] if gate(b, c) else H[t]     # gate

``build`` wires the same nodes for every strategy that needs nothing new (DESIGN.md table):
``static`` (no train, no refine), ``harness_only`` (refine from sampled train rollouts, gated),
``rl_only`` (train only), ``ungated`` (train + refine, candidate adopted without the gate).
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from coevo.nodes.check import check
from coevo.meta.context import MetaContext
from coevo.nodes.curate import curate
from coevo.nodes.edit import edit, fan_out
from coevo.nodes.gate import adopt, gate
from coevo.nodes.schedule import final_test, more_rounds, next_round
from coevo.nodes.setup import setup
from coevo.meta.state import MetaState
from coevo.nodes.train import sample, train
from coevo.nodes.validate import validate


def build(*, trains: bool = True, refines: bool = True, gated: bool = True) -> StateGraph:
    """The meta-loop builder: VACE with all flags on; each baseline turns some off."""
    builder = StateGraph(MetaState, context_schema=MetaContext)
    builder.add_node("setup", setup)
    builder.add_node("final_test", final_test)
    builder.add_edge(START, "setup")
    if not (trains or refines):
        builder.add_edge("setup", "final_test")
        builder.add_edge("final_test", END)
        return builder

    # W[t+1], T[t] = train(W[t], H[t], D_train); with frozen weights T[t] is sampled instead
    first = "train" if trains else "sample"
    builder.add_node(first, train if trains else sample)
    builder.add_edge("setup", first)
    last = first
    if refines:
        # H'[t] = refine(H[t], T[t]): curate -> one edit per direction (Send) -> check
        builder.add_node("curate", curate)
        builder.add_node("edit", edit)
        builder.add_node("check", check)
        builder.add_edge(first, "curate")
        builder.add_conditional_edges("curate", fan_out, ["edit", "check"])
        builder.add_edge("edit", "check")
        if gated:
            # b, c = validate(W[t+1], H[t]), validate(W[t+1], H'[t]); H[t+1] = H'[t] if gate(b, c) else H[t]
            builder.add_node("validate", validate)
            builder.add_node("gate", gate)
            builder.add_edge("check", "validate")
            builder.add_edge("validate", "gate")
            last = "gate"
        else:
            builder.add_node("adopt", adopt)
            builder.add_edge("check", "adopt")
            last = "adopt"
    # for t in rounds
    builder.add_node("next_round", next_round)
    builder.add_edge(last, "next_round")
    builder.add_conditional_edges("next_round", more_rounds, {"continue": first, "done": "final_test"})
    builder.add_edge("final_test", END)
    return builder


graph = build().compile(name="vace")
