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
from langgraph.runtime import Runtime

from coevo.graphs.vace.vace import stage_effect
from coevo.meta.context import MetaContext
from coevo.meta.state import MetaState
from coevo.nodes.loop import gate, meta_graph, next_round, sample, train, validate
from coevo.nodes.refine import add_refinement


def stagewise_rounds(state: MetaState, runtime: Runtime[MetaContext]) -> str:
    """The SIA-style baseline's two stages over one round counter (VACE Table 5: caps B_W, then B_H):
    ``"weights"`` while ``round < rounds`` (the weight stages), ``"harness"`` while
    ``round < 2 * rounds`` (the gated refinements under the final weights), else ``"done"``."""
    rounds, rnd = state.get("rounds", runtime.context.config.rounds), state.get("round", 0)
    return "weights" if rnd < rounds else "harness" if rnd < 2 * rounds else "done"


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
