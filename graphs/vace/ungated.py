"""VACE without its gate (the paper's "ungated alternation", docs/design.md, Strategies): the refined
candidate replaces the incumbent with no validation and no check gate::

    for t in rounds:
        W[t+1], T[t] = train(W[t], H[t], D_train)
        val(W[t], H[t]), val(W[t+1], H[t])             # stage_effect: the stage's own effect
        H'[t]        = refine(H[t], T[t])                # curate -> edit (no check)
        H[t+1]       = H'[t]                            # adopt

With ``meta.candidates = 1`` (the default, as in VACE) H'[t] is the one edit of the round; with
more, ``adopt`` takes the edit of the best-supported direction (the first that applied).
"""

from __future__ import annotations

from langgraph.graph import StateGraph

from coevo.graphs.vace.nodes import adopt, stage_effect
from coevo.graphs.wiring import add_refinement, add_rounds, meta_graph
from coevo.nodes.train import train


def build() -> StateGraph:
    """The ungated wiring (uncompiled)."""
    builder = meta_graph()
    builder.add_node("train", train)
    builder.add_node("stage_effect", stage_effect)
    builder.add_node("adopt", adopt)
    # W[t+1], T[t] = train(W[t], H[t], D_train)
    builder.add_edge("setup", "train")
    builder.add_edge("train", "stage_effect")
    # H'[t] = refine(H[t], T[t]), no check; H[t+1] = H'[t]
    add_refinement(builder, after="stage_effect", then="adopt", checked=False)
    # for t in rounds
    add_rounds(builder, first="train", last="adopt")
    return builder


graph = build().compile(name="ungated")
