"""CoEvo-RSI (``shared/papers/coevo_rsi.txt``, Figure 3) as a LangGraph graph::

    for t in rounds:
        T[t]           = sample(p_t, D_train)                   # the incumbent pair's train evidence
        A<t            = survey(archive)                        # every archived harness and checkpoint
        b[t,1..K]      = curate(A<t, T[t])                      # briefs from past mismatches, train only
        H[t,k]         = edit(H[i_{t,k}], b[t,k])               # editor k picks base i_{t,k} from A<t
        H[t,k]         = check(H[t,k])                          # static + smoke TIMR checks
        proposals      = inherit(H[t,k], A<t)                   # select / TIES-merge checkpoints, val-scored
        p⁺_t           = adapt(p̄_t)                             # SFT (rsft) or GRPO under its harness
        p_{t+1}        = promote(p_t, p̄_t, p⁺_t; δ_prom)        # promotion margin
"""

from __future__ import annotations

from typing import Callable

from langgraph.graph import StateGraph

from coevo.graphs.wiring import add_rounds, meta_graph
from coevo.nodes.check import check
from coevo.nodes.inherit import curate_archive, edit_from_base, fan_out_briefs, survey
from coevo.nodes.promote import adapt, inherit, promote
from coevo.nodes.train import sample


def wire(survey_node: Callable[..., dict]) -> StateGraph:
    """CoEvo-RSI's wiring with ``survey_node`` reading A<t (``survey``: the whole archive;
    ``survey_latest``: the Latest-only ablation), uncompiled."""
    builder = meta_graph()
    builder.add_node("sample", sample)
    builder.add_node("survey", survey_node)
    builder.add_node("curate", curate_archive)
    builder.add_node("edit", edit_from_base)
    builder.add_node("check", check)
    builder.add_node("inherit", inherit)
    builder.add_node("adapt", adapt)
    builder.add_node("promote", promote)
    # T[t] = sample(p_t, D_train)
    builder.add_edge("setup", "sample")
    # A<t, then briefs from its evidence
    builder.add_edge("sample", "survey")
    builder.add_edge("survey", "curate")
    # H[t,k] = edit(H[i_{t,k}], b[t,k]): one editor per brief, each picks its base
    builder.add_conditional_edges("curate", fan_out_briefs, ["edit", "check"])
    builder.add_edge("edit", "check")
    # model inheritance for each offspring, then adapt the best proposal and promote with δ_prom
    builder.add_edge("check", "inherit")
    builder.add_edge("inherit", "adapt")
    builder.add_edge("adapt", "promote")
    # for t in rounds
    add_rounds(builder, first="sample", last="promote")
    return builder


def build() -> StateGraph:
    """CoEvo-RSI's wiring (uncompiled): inheritance from the whole archive."""
    return wire(survey)


graph = build().compile(name="coevo_rsi")
