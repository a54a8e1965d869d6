"""The SIA-style baseline (VACE Table 5's ``SIA-style`` row, after Hebbar et al., 2026; Figure 1's
stagewise schedule): the whole RL budget B_W first, then the whole harness-proposal budget B_H,
each proposal through VACE's validation gate under the final weights::

    for t in rounds:                                     # weights: B_W = rounds weight stages
        W[t+1], T[t] = train(W[t], H0, D_train)
        val(W[t], H0), val(W[t+1], H0)                   # stage_effect: the stage's own effect
    for t in rounds:                                     # harness: B_H = rounds refinements, gated
        T'[t]  = sample(W[T], H[t], D_train)
        H'[t]  = refine(H[t], T'[t])
        b, c   = validate(W[T], H[t]), validate(W[T], H'[t])
        H[t+1] = H'[t] if gate(b, c) else H[t]

Table 5 gives it the same caps as VACE (B_W, B_H) and a harness gate; it differs from VACE only in
the order: no harness revision reaches a weight stage. The two stages share one round counter
(rounds ``0 .. 2 x rounds - 1``; ``stagewise_rounds``), so the run history lists both. The harness
stage samples its own train trajectories (``sample``, as ``harness_only`` does), since no weight
stage runs beside it.
"""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.vace.nodes import stage_effect, stagewise_rounds
from coevo.graphs.wiring import add_refinement, meta_graph
from coevo.nodes.gate import gate
from coevo.nodes.schedule import next_round
from coevo.nodes.train import sample, train
from coevo.nodes.validate import validate


def build() -> StateGraph:
    """The SIA-style wiring (uncompiled)."""
    builder = meta_graph()
    for name, node in (("train", train), ("stage_effect", stage_effect), ("sample", sample),
                       ("validate", validate), ("gate", gate), ("next_round", next_round)):
        builder.add_node(name, node)
    # weights: W[t+1], T[t] = train(W[t], H0, D_train), for the whole budget B_W
    builder.add_conditional_edges("setup", stagewise_rounds, {"weights": "train", "harness": "sample",
                                                               "done": "final_test"})
    builder.add_edge("train", "stage_effect")
    builder.add_edge("stage_effect", "next_round")
    # harness: T'[t] = sample(W[T], H[t]); H'[t] = refine(H[t], T'[t])
    refined = add_refinement(builder, after="sample")
    # b, c = validate(W[T], H[t]), validate(W[T], H'[t]); H[t+1] = H'[t] if gate(b, c) else H[t]
    builder.add_edge(refined, "validate")
    builder.add_edge("validate", "gate")
    builder.add_edge("gate", "next_round")
    # rounds 0 .. rounds-1 train, rounds .. 2 x rounds - 1 refine, then test
    builder.add_conditional_edges("next_round", stagewise_rounds, {"weights": "train", "harness": "sample",
                                                                    "done": "final_test"})
    return builder


graph = build().compile(name="sia")
