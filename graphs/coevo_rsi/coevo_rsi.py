"""CoEvo-RSI ("When Harnesses Evolve, Which Models Should Follow?"; docs/papers.md, Figure 3) as a
LangGraph graph::

    for t in rounds:
        T[t]           = sample(p_t, D_train)                   # the incumbent pair's train evidence
        A<t            = survey(archive)                        # every archived harness and checkpoint
        b[t,1..K]      = curate(A<t, T[t])                      # curate_archive: past mismatches, train only
        H[t,k]         = edit(H[i_{t,k}], b[t,k])               # edit: editor k picks base i_{t,k} from A<t
        H[t,k]         = check(H[t,k])                          # static + smoke TIMR checks
        proposals      = inherit(H[t,k], A<t)                   # select / TIES-merge checkpoints, val-scored
        p⁺_t           = adapt(p̄_t)                             # SFT (rsft) or GRPO under its harness
        p_{t+1}        = promote(p_t, p̄_t, p⁺_t; δ_prom)        # promotion margin
"""

from __future__ import annotations

from typing import Callable

from langgraph.graph import StateGraph

from coevo.graphs.coevo_rsi.harness_inheritance import curate_archive, edit_from_base, fan_out_with_archive, survey
from coevo.graphs.coevo_rsi.model_inheritance import adapt, inherit, promote
from coevo.graphs.coevo_rsi.state import CoevoRsiState
from coevo.nodes.loop import add_rounds, meta_graph, sample
from coevo.nodes.refine import check


def wire(survey_node: Callable[..., dict]) -> StateGraph:
    """CoEvo-RSI's wiring with ``survey_node`` reading A<t (``survey``: the whole archive;
    ``survey_latest``: the Latest-only ablation), uncompiled."""
    builder = meta_graph(state=CoevoRsiState)
    builder.add_node("sample", sample)
    builder.add_node("survey", survey_node)
    builder.add_node("curate_archive", curate_archive)
    builder.add_node("edit", edit_from_base)
    builder.add_node("check", check)
    builder.add_node("inherit", inherit)
    builder.add_node("adapt", adapt)
    builder.add_node("promote", promote)
    # T[t] = sample(p_t, D_train)
    builder.add_edge("setup", "sample")
    # A<t = survey(archive)
    builder.add_edge("sample", "survey")
    # b[t,1..K] = curate(A<t, T[t])
    builder.add_edge("survey", "curate_archive")
    # H[t,k] = edit(H[i_{t,k}], b[t,k]): one editor per brief, each picks its base
    builder.add_conditional_edges("curate_archive", fan_out_with_archive, ["edit", "check"])
    # H[t,k] = check(H[t,k])
    builder.add_edge("edit", "check")
    # proposals = inherit(H[t,k], A<t)
    builder.add_edge("check", "inherit")
    # p⁺_t = adapt(p̄_t)
    builder.add_edge("inherit", "adapt")
    # p_{t+1} = promote(p_t, p̄_t, p⁺_t; δ_prom)
    builder.add_edge("adapt", "promote")
    # for t in rounds
    add_rounds(builder, first="sample", last="promote")
    return builder


def build() -> StateGraph:
    """CoEvo-RSI's wiring (uncompiled): inheritance from the whole archive."""
    return wire(survey)


graph = build().compile(name="coevo_rsi")
