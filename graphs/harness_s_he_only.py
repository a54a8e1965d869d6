"""Harness-S's harness-evolution-only variant (frozen policy W0, Rank-1 routing)::

    P_1 = {H0}; for g in evolution rounds:
        T_g = sample(W0, P_g, D_train)                                # sample_parents
        C_g = {Edit(H, d)}; check                                     # curate (briefs) -> edit (Send) -> check
        H_g = H_{g-1} ∪ C_g^valid;  P_{g+1} = argmax coverage         # select_parents (Eq. 3, 4)
    P = Profile(E_i, E_0) under W0                                    # profile (Eq. 11)
    test H0 and Rank-1/2/3 routing under W0                           # final_test (Eq. 12)

``harness_s_graph`` and ``add_evolution`` are the sub-wirings ``harness_s`` shares.
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from coevo.meta.context import MetaContext
from coevo.meta.state import MetaState
from coevo.nodes.check import check
from coevo.nodes.edit import edit
from coevo.nodes.evolve import curate_briefs, fan_out_briefs, sample_parents
from coevo.nodes.profile import profile
from coevo.nodes.route import routed_test
from coevo.nodes.select_parents import more_evolution, select_parents
from coevo.nodes.setup import setup


def harness_s_graph() -> StateGraph:
    """A Harness-S meta graph: ``setup`` first, ``final_test`` (H0 and Rank-r routing on test) last."""
    builder = StateGraph(MetaState, context_schema=MetaContext)
    builder.add_node("setup", setup)
    builder.add_node("final_test", routed_test)
    builder.add_edge(START, "setup")
    builder.add_edge("final_test", END)
    return builder


def add_evolution(builder: StateGraph, after: str, then: str) -> None:
    """Directional evolution (§3.2) after node ``after``, going to ``then`` when its rounds are done:
    sample_parents -> curate (``curate_briefs``) -> edit per brief (``Send``) -> check -> select_parents -> loop."""
    builder.add_node("sample_parents", sample_parents)
    builder.add_node("curate", curate_briefs)
    builder.add_node("edit", edit)
    builder.add_node("check", check)
    builder.add_node("select_parents", select_parents)
    builder.add_edge(after, "sample_parents")
    builder.add_edge("sample_parents", "curate")
    builder.add_conditional_edges("curate", fan_out_briefs, ["edit", "check"])
    builder.add_edge("edit", "check")
    builder.add_edge("check", "select_parents")
    builder.add_conditional_edges("select_parents", more_evolution, {"continue": "sample_parents", "done": then})


def build() -> StateGraph:
    """The frozen-policy wiring (uncompiled)."""
    builder = harness_s_graph()
    add_evolution(builder, after="setup", then="profile")
    builder.add_node("profile", profile)
    builder.add_edge("profile", "final_test")
    return builder


graph = build().compile(name="harness_s_he_only")
