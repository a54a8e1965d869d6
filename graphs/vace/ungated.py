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
from langgraph.runtime import Runtime

from coevo.graphs.vace.vace import stage_effect
from coevo.meta.context import MetaContext
from coevo.meta.sealing import unseal
from coevo.meta.state import MetaState
from coevo.nodes.loop import add_rounds, meta_graph, train
from coevo.nodes.refine import add_refinement


def adopt(state: MetaState, runtime: Runtime[MetaContext]) -> dict:
    """No gate (VACE's ungated ablation): H[t+1] = H'[t], the round's edit that applied (of the
    best-supported direction when ``meta.candidates`` > 1) with no check and no validation; the
    round then holds no validation. Returns the round's candidates as ``checked`` (for the round
    summary) and removes the edits not adopted from ``sealed``."""
    proposed = list(state.get("candidates", []))
    applied = [c for c in proposed if c.status != "rejected" and c.spec_id]
    chosen = applied[0].spec_id if applied else None
    if chosen:
        runtime.context.log("adopt", f"round {state.get('round', 0)}: {chosen[:12]} (ungated)")
    dropped = unseal([c.spec_id or "" for c in applied if c.spec_id != chosen], state)
    return {"checked": proposed, "sealed": dropped, **({"incumbent": chosen, "validation": {}} if chosen else {})}


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
